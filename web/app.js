// The web app: pairing, then the sessions and what waits for the person, live
// over the daemon's WebSocket. Modules: link (connection), model (state),
// decide (approvals, offline queue), cards/approval/question/compose, panels,
// push (notifications on this device; sw.js is the service worker).
import { $ } from "./dom.js";
import { Link, pair, storedToken, forgetToken } from "./link.js";
import { Model } from "./model.js";
import { Decisions } from "./decide.js";
import { renderCards, tickAll } from "./cards.js";
import { renderNotifications, loadSettings, loadDevices, loadAudit } from "./panels.js";
import { registerWorker, loadPush, reportPhase, unregistered, closeShown, forgetPush, syncPush } from "./push.js";

let noticeTimer = null;
function say(text) {
  const n = $("notice");
  n.textContent = text;
  n.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { n.hidden = true; }, 8000);
}

let rendered = false;
const model = new Model(render);
const decisions = new Decisions(model, say);
const link = new Link({ onUp, onDown, onLost, onUnauthorized });
const app = { model, decisions, say, client: () => link.client };
let tab = "sessions";
let showSession = null; // a session to bring into view once its card is there (a notification's link)
let tapped = null;      // Approve or Deny tapped on a notification, sent once connected

function render() {
  renderCards($("session-list"), app);
  if (tab === "notifications") renderNotifications(model);
  const card = showSession && document.querySelector(`.card[data-key="${CSS.escape(showSession)}"]`);
  if (card) { showSession = null; card.scrollIntoView({ block: "start" }); }
}

async function onUp(c) {
  $("link-state").textContent = "Connected";
  document.body.dataset.link = "up";
  model.watch(c);
  c.on("approval.resolved", ({ requestId }) => decisions.serverQueued.delete(requestId));
  c.on("notification.clear", ({ ids }) => closeShown(ids).catch(() => {}));
  c.on("push.unregistered", (p) => unregistered(p, say));
  try {
    await model.load(c);
  } catch {
    return; // the connection went during the load: the next one loads again
  }
  render();
  if (!rendered) { rendered = true; performance.mark("cb-first-render"); }
  syncPush(model.mine);
  reportPhase(c);
  await decisions.flush(c);
  sendTapped();
  openTab(tab);
}

/** The service worker hands over a tap on a notification (sw.js says why not a URL). */
function fromWorker(ev) {
  const m = ev.data;
  if (m?.type !== "notificationclick") return;
  showLink(m.deepLink);
  if ((m.action === "approve" || m.action === "deny") && m.requestId) {
    tapped = { ...m, decision: m.action === "approve" ? "allow" : "deny" };
    if (model.loaded) sendTapped();
  }
}

function sendTapped() {
  const c = link.client;
  if (!tapped || !c) return;
  const t = tapped;
  tapped = null;
  const a = model.approvals.get(t.requestId) ??
    { requestId: t.requestId, sessionId: t.sessionId, toolName: t.toolName ?? "Approval", remainingSeconds: 0, at: 0 };
  decisions.respond(c, a, t.decision, { source: "notification" });
}

/** codingbridge://session/ID/... (a notification's deepLink) or #session=ID / #settings in the URL. */
function showLink(deepLink) {
  const m = /^codingbridge:\/\/(session\/([^/]+)|settings)/.exec(deepLink ?? "");
  if (!m) return;
  if (m[2]) { showSession = decodeURIComponent(m[2]); openTab("sessions"); model.touch(); } else openTab("settings");
}

function onDown() {
  $("link-state").textContent = "Reconnecting…";
  document.body.dataset.link = "down";
}

function onLost(lost) { $("lost").hidden = !lost; }

function onUnauthorized(e) {
  forgetToken();
  link.stop();
  showPairing(`This browser is no longer paired (${e.data?.reason ?? "token refused"}). Pair it again.`);
}

function showPairing(error = "") {
  $("pair-view").hidden = false;
  $("app-view").hidden = true;
  $("tabs").hidden = true;
  $("pair-error").textContent = error;
  $("link-state").textContent = "Not paired";
}

function showApp() {
  $("pair-view").hidden = true;
  $("app-view").hidden = false;
  $("tabs").hidden = false;
  link.start();
}

async function pairWith(code, name) {
  $("pair-error").textContent = "";
  try {
    await pair(code, name || defaultName());
    showApp();
  } catch (e) {
    const why = e.data?.reason ?? e.message;
    showPairing(`Pairing failed: ${why}. Get a new code with codingbridge devices pair.`);
  }
}

function defaultName() {
  const ua = navigator.userAgent;
  const what = /iPhone|iPad/.test(ua) ? "iPhone" : /Android/.test(ua) ? "Android" : "Browser";
  return `${what} (web)`;
}

function openTab(name) {
  tab = name;
  for (const b of $("tabs").querySelectorAll("button")) {
    if (b.dataset.tab === name) b.setAttribute("aria-current", "page"); else b.removeAttribute("aria-current");
    $(b.dataset.tab).hidden = b.dataset.tab !== name;
  }
  const c = link.client;
  if (name === "notifications") renderNotifications(model);
  if (!c) return;
  const failed = (e) => say(`Could not load: ${e.rpcMessage ?? e.message}`);
  if (name === "settings") {
    loadSettings(c, say).catch(failed);
    loadPush(c, say).catch(failed);
  }
  if (name === "devices") loadDevices(c, model, say).catch(failed);
  if (name === "audit") loadAudit(c).catch(failed);
}

async function forgetDevice() {
  if (!confirm("Forget this device? It will need a new pairing code.")) return;
  // revoke as well: a token left behind in a lost browser should not keep working
  // (forgotten first, so the close the revocation causes is not answered by a reconnect)
  forgetToken();
  await forgetPush(link.client);
  if (link.client && model.me) await link.client.call("device.revoke", { deviceId: model.me }).catch(() => {});
  link.stop();
  decisions.forget();
  model.forget();
  showPairing();
}

function boot() {
  $("pair-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    pairWith($("pair-code").value, $("pair-name").value.trim());
  });
  $("tabs").addEventListener("click", (ev) => { if (ev.target.dataset.tab) openTab(ev.target.dataset.tab); });
  $("forget").addEventListener("click", forgetDevice);
  $("audit-refresh").addEventListener("click", () => openTab("audit"));
  setInterval(() => tickAll($("session-list")), 1000);
  navigator.serviceWorker?.addEventListener("message", fromWorker);
  document.addEventListener("visibilitychange", () => reportPhase(link.client));
  addEventListener("load", registerWorker);
  // `codingbridge devices pair` prints <base>/#pair=CODE: the code never reaches a server log
  const hash = new URLSearchParams(location.hash.slice(1));
  const code = hash.get("pair");
  if (hash.has("session")) showLink(`codingbridge://session/${encodeURIComponent(hash.get("session"))}`);
  if (hash.has("settings")) tab = "settings";
  if (!code && location.hash) history.replaceState(null, "", location.pathname);
  if (code) {
    history.replaceState(null, "", location.pathname);
    pairWith(code, "");
  } else if (storedToken()) {
    showApp();
  } else {
    showPairing();
  }
}

boot();
