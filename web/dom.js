// Small DOM and formatting helpers shared by the views.

/** h("button", {type: "button", onclick}, "Approve"): attributes starting with "on" are listeners. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c);
  return el;
}

export const $ = (id) => document.getElementById(id);

/** 165 -> "2:45", 3725 -> "1:02:05" (the Live Activity's style). */
export function clock(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const two = (n) => String(n).padStart(2, "0");
  const hours = Math.floor(s / 3600);
  const rest = `${two(Math.floor(s / 60) % 60)}:${two(s % 60)}`;
  return hours ? `${hours}:${rest}` : `${Math.floor(s / 60)}:${two(s % 60)}`;
}

export function when(ms) {
  return new Date(ms).toLocaleString([], { dateStyle: "short", timeStyle: "medium" });
}

/** Reconciles parent's children with items by key: keeps existing elements (and their focus). */
export function reconcile(parent, items, key, make, update) {
  const old = new Map([...parent.children].map((el) => [el.dataset.key, el]));
  let prev = null;
  for (const item of items) {
    const k = key(item);
    let el = old.get(k);
    old.delete(k);
    if (!el) { el = make(item); el.dataset.key = k; }
    update(el, item);
    const want = prev ? prev.nextSibling : parent.firstChild;
    if (want !== el) parent.insertBefore(el, want);
    prev = el;
  }
  for (const el of old.values()) el.remove();
}
