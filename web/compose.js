// A message to a session. What is typed is kept as the session's draft on
// the daemon (draft.save), so it survives a reload or another device.
import { h } from "./dom.js";

const SAVE_AFTER_MS = 600;

export function composer(s, app) {
  const id = `m-${s.id}`.replace(/[^\w-]/g, "_");
  const text = h("textarea", { id, rows: "2" });
  const status = h("p", { class: "sent", role: "status" });
  let timer = null;
  const saveDraft = () => {
    const c = app.client();
    if (c) c.call("draft.save", { sessionId: s.id, text: text.value }).catch(() => {});
  };
  text.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(saveDraft, SAVE_AFTER_MS); });
  const details = h("details", { class: "compose" },
    h("summary", {}, "Message"),
    h("form", { onsubmit: (ev) => send(ev, s, text, status, app) },
      h("label", { for: id }, `Message to ${s.projectName ?? "this session"}`),
      text,
      h("button", { type: "submit" }, "Send message"),
      status));
  details.addEventListener("toggle", async () => {
    const c = app.client();
    if (!details.open || !c || text.value) return;
    const d = await c.call("draft.get", { sessionId: s.id }).catch(() => null);
    if (d?.text && !text.value) text.value = d.text;
  });
  return details;
}

async function send(ev, s, text, status, app) {
  ev.preventDefault();
  const c = app.client();
  const body = text.value.trim();
  if (!body) return;
  if (!c) { status.textContent = "Not connected; your message is kept here."; return; }
  try {
    // the key makes a retry after a lost reply safe: the daemon stores it once
    await c.messageSend({ sessionId: s.id, text: body, idempotencyKey: crypto.randomUUID() });
    text.value = "";
    status.textContent = "Sent.";
    c.call("draft.clear", { sessionId: s.id }).catch(() => {});
  } catch (e) {
    status.textContent = `Not sent: ${e.rpcMessage ?? e.message}`;
  }
}
