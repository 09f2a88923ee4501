// The other sections: notification history, settings, devices, audit log.
import { h, $, when, reconcile } from "./dom.js";

const TOGGLES = [
  ["enableLiveActivities", "Live Activities"],
  ["enableBackgroundNotifications", "Notifications in the background"],
  ["showNotificationDetails", "Show details in notifications"],
  ["backgroundInLowPowerMode", "Keep working in Low Power Mode"],
  ["enableTimeSensitiveNotifications", "Break through Focus modes"],
];

export function renderNotifications(model) {
  const list = $("notification-list");
  list.replaceChildren(...model.history.map((n) =>
    h("li", {}, h("strong", {}, n.title), " ", h("span", {}, n.body), " ", h("time", {}, when(n.at)))));
}

export async function loadSettings(c, say) {
  const { settings } = await c.call("settings.get");
  const form = $("settings-form");
  const change = (params) => c.call("settings.update", params)
    .then(() => say("Saved."), (e) => say(`Not saved: ${e.rpcMessage ?? e.message}`));
  const toggles = TOGGLES.map(([key, label]) => {
    const box = h("input", { type: "checkbox", id: `set-${key}`, checked: settings[key] });
    box.addEventListener("change", () => change({ [key]: box.checked }));
    return h("p", { class: "toggle" }, box, h("label", { for: `set-${key}` }, label));
  });
  const timeout = h("input", { type: "number", id: "set-timeout", min: "1", max: "86400", step: "1",
    value: String(settings.approvalTimeoutSeconds) });
  const save = h("button", { type: "submit" }, "Save timeout");
  form.onsubmit = (ev) => { ev.preventDefault(); change({ approvalTimeoutSeconds: Number(timeout.value) }); };
  form.replaceChildren(...toggles,
    h("p", {}, h("label", { for: "set-timeout" }, "Approval timeout (seconds)"), timeout, save));
}

export async function loadDevices(c, model, say) {
  const { devices } = await c.call("device.list");
  model.setDevices(devices);
  reconcile($("device-list"), devices, (d) => d.deviceId, (d) => deviceRow(d, c, model, say), (el, d) => {
    const me = d.deviceId === model.me ? " (this device)" : "";
    const seen = d.lastSeenAt ? `last seen ${when(d.lastSeenAt)}` : "never connected";
    const state = d.revoked ? "revoked" : d.connected ? "connected" : seen;
    el.querySelector(".name").textContent = d.name + me;
    el.querySelector(".state").textContent = state;
    el.querySelector("button").hidden = d.revoked;
  });
}

function deviceRow(d, c, model, say) {
  const revoke = h("button", { type: "button", class: "danger", "aria-label": `Revoke ${d.name}` }, "Revoke");
  revoke.addEventListener("click", async () => {
    if (!confirm(`Revoke ${d.name}? It will need a new pairing code.`)) return;
    await c.call("device.revoke", { deviceId: d.deviceId })
      .catch((e) => say(`Not revoked: ${e.rpcMessage ?? e.message}`));
    if (d.deviceId !== model.me) loadDevices(c, model, say);
  });
  return h("li", {}, h("span", { class: "name" }), " ", h("span", { class: "state" }), " ", revoke);
}

/** The log pages oldest first: read to its end, show the newest hundred first. */
export async function loadAudit(c) {
  let after = 0;
  let entries = [];
  for (let page = 0; page < 50; page++) {
    const r = await c.call("audit.list", { afterId: after, limit: 1000 });
    entries = entries.concat(r.entries).slice(-100);
    if (!r.entries.length || r.nextAfterId === after) break;
    after = r.nextAfterId;
  }
  $("audit-list").replaceChildren(...entries.reverse().map((e) =>
    h("li", {}, h("time", {}, when(e.time)), " ", h("strong", {}, e.kind), " ",
      h("span", {}, [e.deviceId, e.connection, e.address].filter(Boolean).join(" · ")), " ",
      h("code", {}, JSON.stringify(e.detail)))));
}
