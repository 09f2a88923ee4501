// Notifications on this device: the service worker (sw.js), the browser's
// Web Push subscription made with the daemon's VAPID key, and its
// registration on the daemon (push.register, platform webpush). While on,
// the page also says when it is hidden (app.update phase background), so a
// tab left open behind others is reached by push like a closed one.
import { h, $ } from "./dom.js";

const KEY = "codingbridge.push"; // {registrationId, endpoint}: this browser's registration

export const pushSupported = () =>
  "serviceWorker" in navigator && "PushManager" in window && "Notification" in window && isSecureContext;

const stored = () => JSON.parse(localStorage.getItem(KEY) || "null");
export const pushOn = () => !!stored() && Notification.permission === "granted";

export function registerWorker() {
  if (!("serviceWorker" in navigator)) return;
  navigator.serviceWorker.register("sw.js", { scope: "./" }).catch((e) => console.warn("service worker:", e));
}

/** The tab's visibility, for the daemon's push routing (only while notifications are on here). */
export function reportPhase(c) {
  if (!c || !pushSupported() || !pushOn()) return;
  c.appUpdate({ phase: document.visibilityState === "visible" ? "foreground" : "background" }).catch(() => {});
}

/** The daemon removed our registration (its push service said gone): it is off here too. */
export function unregistered({ registrationId }, say) {
  if (stored()?.registrationId !== registrationId) return;
  localStorage.removeItem(KEY);
  say("Notifications on this device stopped (the push service dropped them). Turn them on again in Settings.");
}

/** Closes the shown notifications with these ids (decided elsewhere, or here): the worker
 * does it, after any notification it is still showing. */
export async function closeShown(ids) {
  const reg = await navigator.serviceWorker?.getRegistration();
  reg?.active?.postMessage({ close: ids });
}

/** Off here: the daemon's registration (when connected) and the browser's subscription. */
export async function forgetPush(c) {
  const mine = stored();
  if (c && mine) await c.call("push.unregister", { registrationId: mine.registrationId }).catch(() => {});
  localStorage.removeItem(KEY);
  const reg = pushSupported() && await navigator.serviceWorker.getRegistration();
  const sub = reg && await reg.pushManager.getSubscription();
  await sub?.unsubscribe().catch(() => {});
}

/** The Settings row: a toggle, or why there is none. */
export async function loadPush(c, say) {
  const box = $("push-setting");
  const note = (text) => box.replaceChildren(h("p", { class: "empty", id: "push-note" }, text));
  if (!pushSupported()) {
    return note("Notifications on this device: this browser has no Web Push here. (On an iPhone or iPad, " +
      "add CodingBridge to the Home Screen first; browsers need https or this computer's own address.)");
  }
  const { publicKey, enabled } = await c.call("push.vapidPublicKey");
  if (!enabled || !publicKey) {
    return note("Notifications on this device: the daemon does not send Web Push. Start it with " +
      "--vapid-subject mailto:you@example.org to turn it on.");
  }
  const toggle = h("input", { type: "checkbox", id: "set-push", checked: pushOn() });
  const status = h("p", { class: "empty", role: "status" });
  toggle.addEventListener("change", async () => {
    toggle.disabled = true;
    try {
      if (toggle.checked) await enable(c, publicKey);
      else await disable(c);
      status.textContent = toggle.checked ? "On: you are notified here while this page is closed or hidden." : "Off.";
      say(toggle.checked ? "Notifications on." : "Notifications off.");
      reportPhase(c);
    } catch (e) {
      toggle.checked = pushOn();
      status.textContent = `Not changed: ${e.rpcMessage ?? e.message}`;
    } finally {
      toggle.disabled = false;
    }
  });
  if (Notification.permission === "denied") status.textContent = "Blocked in this browser's site settings.";
  box.replaceChildren(h("p", { class: "toggle" }, toggle, h("label", { for: "set-push" }, "Notifications on this device")),
    status);
}

async function enable(c, publicKey) {
  if (await Notification.requestPermission() !== "granted") {
    throw new Error("notifications are blocked for this site (the browser's site settings)");
  }
  const reg = await navigator.serviceWorker.ready;
  const key = fromBase64url(publicKey);
  let sub = await reg.pushManager.getSubscription();
  if (sub && !sameKey(sub.options?.applicationServerKey, key)) { await sub.unsubscribe(); sub = null; }
  sub ??= await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  const json = sub.toJSON();
  const r = await c.call("push.register", { platform: "webpush", subscription: json });
  localStorage.setItem(KEY, JSON.stringify({ registrationId: r.registrationId, endpoint: json.endpoint }));
}

async function disable(c) {
  const mine = stored();
  if (mine) await c.call("push.unregister", { registrationId: mine.registrationId }); // a failure keeps it on
  await forgetPush();
}

function fromBase64url(s) {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
}

function sameKey(buf, key) {
  if (!buf) return false;
  const a = new Uint8Array(buf);
  return a.length === key.length && a.every((b, i) => b === key[i]);
}

/** On connect: a registration the daemon no longer has (removed, or a new state dir) is off here too. */
export function syncPush(mine) {
  const reg = stored();
  if (reg && mine && !mine.push?.some((p) => p.registrationId === reg.registrationId)) localStorage.removeItem(KEY);
}
