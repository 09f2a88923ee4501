// The WebSocket to the daemon's /rpc: pairing, the token in localStorage,
// reconnecting with backoff, and "Connection Lost" after 30 s down.
import { connectWebSocket, RPCError } from "./codingbridge.js";

const TOKEN = "codingbridge.token";
const LOST_AFTER_MS = 30000;
const UNAUTHORIZED = -32001;

/** The /rpc of whichever address served this page (its own origin passes the Origin rule). */
export const rpcURL = () => `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/rpc`;

export const storedToken = () => localStorage.getItem(TOKEN);

/** Pairs with a code from `codingbridge devices pair`: -> {deviceId, name, token}. */
export async function pair(code, name) {
  const c = await connectWebSocket(rpcURL(), { initialize: false });
  try {
    const params = { code: code.trim() };
    if (name) params.name = name;
    const r = await c.call("device.pair", params);
    localStorage.setItem(TOKEN, r.token);
    return r;
  } finally {
    c.close();
  }
}

export function forgetToken() { localStorage.removeItem(TOKEN); }

/**
 * Keeps one authenticated client. Hooks: onUp(client) once initialized,
 * onDown() when it closes, onLost(bool) for the banner, onUnauthorized(error)
 * when the token no longer works (revoked).
 */
export class Link {
  constructor(hooks) {
    this.hooks = hooks;
    this.client = null;
    this.attempt = 0;
    this.timer = null;
    this.lostTimer = null;
    this.connecting = false;
    this.stopped = false;
    // Come back at once when the network or the page does, not at the next backoff step.
    addEventListener("online", () => this.now());
    document.addEventListener("visibilitychange", () => { if (!document.hidden) this.now(); });
  }

  start() { this.stopped = false; this.connect(); }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.lostTimer);
    const c = this.client;
    this.client = null;
    c?.close();
  }

  now() {
    if (this.client || this.connecting || this.stopped) return;
    this.attempt = 0;
    this.connect();
  }

  async connect() {
    clearTimeout(this.timer);
    const token = storedToken();
    if (!token || this.connecting) return;
    this.connecting = true;
    try {
      const c = await connectWebSocket(rpcURL(), { token, clientInfo: { name: "codingbridge-web", version: "1" } });
      this.connecting = false;
      if (this.stopped) { c.close(); return; }
      this._up(c);
    } catch (e) {
      this.connecting = false;
      // a token refused is the end of this pairing; "rate limited" only means later
      const refused = e instanceof RPCError && e.code === UNAUTHORIZED && e.data?.reason !== "rate limited";
      if (refused) this.hooks.onUnauthorized(e);
      else this._down();
    }
  }

  _up(c) {
    this.client = c;
    this.attempt = 0;
    clearTimeout(this.lostTimer);
    this.lostTimer = null;
    this.downSince = null;
    this.hooks.onLost(false);
    c.closed.then(() => { if (this.client === c) { this.client = null; this._down(); } });
    this.hooks.onUp(c);
  }

  _down() {
    if (this.downSince == null) {
      this.downSince = Date.now();
      this.lostTimer = setTimeout(() => this.hooks.onLost(true), LOST_AFTER_MS);
    }
    this.hooks.onDown();
    if (this.stopped) return;
    // 0.5 s doubling to 10 s, equal jitter: a restarted daemon is found within a second
    // or two, one back after a long outage within 10 s (an attempt costs one
    // loopback or LAN handshake), and many browsers do not come back in lockstep.
    const cap = Math.min(10000, 500 * 2 ** this.attempt++);
    this.timer = setTimeout(() => this.connect(), cap / 2 + Math.random() * cap / 2);
  }
}
