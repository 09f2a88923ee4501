// The service worker (scope /): a Web Push becomes a notification, and a tap
// on one brings the app. Each push is the JSON-RPC notification the WebSocket
// would have carried: notification.post shows one (tag = its id, so the
// daemon's notification.clear can close it), notification.clear closes them.
//
// It holds no credential. The device token stays in the page's localStorage
// (a worker cannot read it, and a copy in IndexedDB would be one more place
// to lose it from), so Approve or Deny on a notification is not sent from
// here: the worker focuses a window of the app (or opens one) and hands it the
// action by postMessage, and the page answers once it is connected
// (approval.respond, source "notification"). Only this worker can post to the
// page that way; a link such as /#approve=ID, which any site could open,
// decides nothing. The URL carries only what to show (#session=ID).

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (ev) => ev.waitUntil(self.clients.claim()));

// Showing and closing run one at a time: Chrome may drop a notification whose
// showNotification is still running when getNotifications (used to close) runs.
let queue = Promise.resolve();
function serial(fn) {
  queue = queue.then(fn, fn);
  return queue;
}

self.addEventListener("push", (ev) => {
  let m = null;
  try { m = ev.data ? ev.data.json() : null; } catch { /* not ours: shown as a plain notice below */ }
  ev.waitUntil(serial(() => onPush(m)));
});

// The page's WebSocket saw notification.clear: closed here, in the same order as the shows.
self.addEventListener("message", (ev) => {
  const ids = ev.data && ev.data.close;
  if (Array.isArray(ids)) ev.waitUntil(serial(() => close(ids)));
});

self.addEventListener("notificationclick", (ev) => {
  ev.notification.close();
  ev.waitUntil(clicked(ev.notification, ev.action));
});

async function onPush(m) {
  if (m && m.method === "notification.clear") return close(m.params && m.params.ids);
  const p = m && m.method === "notification.post" && m.params;
  if (!p) return self.registration.showNotification("CodingBridge", { body: "Something changed. Open the app." });
  const requestId = p.userInfo && p.userInfo.requestId;
  const options = {
    body: p.body, tag: p.id, data: p, icon: "icon.svg", timestamp: Date.now(), silent: p.sound === false,
    // an approval waits for the person: it stays until answered (where the platform lets it)
    requireInteraction: p.interruptionLevel === "timeSensitive",
  };
  if (p.category === "approval" && requestId && "actions" in Notification.prototype) {
    options.actions = (p.actions || []).filter((a) => a.id === "approve" || a.id === "deny")
      .map((a) => ({ action: a.id, title: a.title }));
  }
  if (typeof p.badge === "number" && self.navigator.setAppBadge) self.navigator.setAppBadge(p.badge).catch(() => {});
  await self.registration.showNotification(p.title, options);
}

async function close(ids) {
  for (const id of ids || []) for (const n of await self.registration.getNotifications({ tag: id })) n.close();
}

/** codingbridge://session/ID[/approval/RID] -> ./#session=ID; settings -> ./#settings. */
function pageURL(deepLink) {
  const m = /^codingbridge:\/\/session\/([^/]+)/.exec(deepLink || "");
  if (m) return `./#session=${m[1]}`;
  return /^codingbridge:\/\/settings/.test(deepLink || "") ? "./#settings" : "./";
}

/** A tap: the notification itself (action "") or one of its buttons. */
async function clicked(notification, action) {
  const p = notification.data || {};
  const info = p.userInfo || {};
  const msg = { type: "notificationclick", action: action || "", deepLink: p.deepLink || info.deepLink || null,
    sessionId: info.sessionId || null, requestId: info.requestId || null, toolName: info.toolName || null };
  const windows = (await self.clients.matchAll({ type: "window", includeUncontrolled: true }))
    .filter((c) => ["/", "/index.html"].includes(new URL(c.url).pathname));
  const app = windows.find((c) => c.focused) || windows.find((c) => c.visibilityState === "visible") || windows[0];
  // focus() is refused outside a real tap; the page acts on the message all the same
  const client = app ? await app.focus().catch(() => app) : await self.clients.openWindow(pageURL(msg.deepLink));
  if (client) client.postMessage(msg);
}
