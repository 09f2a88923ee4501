// A client for CodingBridge Core's JSON-RPC 2.0 server (rpc-spec/openrpc.json).
// Runs in browsers and Node 18+ without packages: this module needs only a
// transport; connectWebSocket uses the platform's WebSocket, node.js adds
// stdio and unix sockets.

/** An error response: code, message, data (what was wrong). */
export class RPCError extends Error {
  constructor(error) {
    super(`${error.code} ${error.message}`);
    this.code = error.code;
    this.data = error.data;
    this.rpcMessage = error.message;
  }
}

// Helpers for the main methods: name -> [method, required params]. Each takes
// one params object with the spec's names, e.g.
// client.approvalRespond({requestId, decision: "allow"}). Any other method:
// client.call(name, params). Tests/e2e/test_clients.py checks this table
// against rpc-spec/openrpc.json.
export const HELPERS = {
  ping: ["ping", []],
  shutdown: ["shutdown", []],
  sessionList: ["session.list", []],
  sessionGet: ["session.get", ["sessionId"]],
  approvalList: ["approval.list", []],
  approvalRespond: ["approval.respond", ["requestId", "decision"]],
  questionAnswer: ["question.answer", ["questionId", "answers"]],
  messageSend: ["message.send", ["sessionId", "text"]],
  activityGet: ["activity.get", []],
  appUpdate: ["app.update", []],
  settingsGet: ["settings.get", []],
  settingsUpdate: ["settings.update", []],
  metricsGet: ["metrics.get", []],
  agentEvent: ["agent.event", ["sessionId", "type"]],
  agentHook: ["agent.hook", ["hook_event_name", "session_id"]],
  devicePair: ["device.pair", ["code"]],
  redact: ["redact", ["text"]],
};

export class Client {
  /**
   * @param transport {start(onMessage, onClose), send(text), close()}
   * @param options {timeout}: ms a call may wait for its reply (default 30 s; 0: forever)
   */
  constructor(transport, { timeout = 30000 } = {}) {
    this.transport = transport;
    this.timeout = timeout;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = new Map();
    this.isClosed = false;
    this.closed = new Promise((resolve) => { this._resolveClosed = resolve; });
    transport.start((text) => this._receive(text), (reason) => this._onClose(reason));
  }

  /** The result of `method`; rejects with RPCError on an error reply. */
  call(method, params, { timeout = this.timeout } = {}) {
    const [promise, msg] = this._request(method, params, timeout);
    this._send(msg);
    return promise;
  }

  notify(method, params) {
    this._send(message(method, params));
  }

  /** [[method, params], ...] as one batch -> results in order, each the result or its RPCError. */
  batch(calls, { timeout = this.timeout } = {}) {
    const pairs = calls.map(([m, p]) => this._request(m, p, timeout));
    const msgs = pairs.map(([, msg]) => msg).filter(Boolean); // none once closed
    if (msgs.length) this._send(msgs);
    return Promise.all(pairs.map(([p]) => p.catch((e) => { if (e instanceof RPCError) return e; throw e; })));
  }

  /** callback(params) for each `method` notification; "*": callback(method, params). Returns an unsubscribe function. */
  on(method, callback) {
    if (!this.listeners.has(method)) this.listeners.set(method, new Set());
    this.listeners.get(method).add(callback);
    return () => this.listeners.get(method).delete(callback);
  }

  /** initialize, then the `initialized` notification. */
  async initialize(params = {}) {
    const result = await this.call("initialize", {
      clientInfo: { name: "codingbridge-js", version: "1" }, capabilities: {}, ...params,
    });
    this.notify("initialized", {});
    return result;
  }

  close() {
    this.transport.close();
    return this.closed;
  }

  _request(method, params, timeout) {
    if (this.isClosed) return [Promise.reject(new Error("the connection is closed")), null];
    const msg = message(method, params);
    msg.id = this.nextId++;
    const promise = new Promise((resolve, reject) => {
      const timer = timeout ? setTimeout(() => {
        this.pending.delete(msg.id);
        reject(new Error(`no reply to ${method} within ${timeout} ms`));
      }, timeout) : null;
      this.pending.set(msg.id, { resolve, reject, timer });
    });
    return [promise, msg];
  }

  _send(msg) {
    if (msg && !this.isClosed) this.transport.send(JSON.stringify(msg));
  }

  _receive(text) {
    let msg;
    try { msg = JSON.parse(text); } catch { return; }
    for (const m of Array.isArray(msg) ? msg : [msg]) {
      if (m.method !== undefined && m.id === undefined) this._emit(m.method, m.params);
      else this._settle(m);
    }
  }

  _emit(method, params) {
    const calls = [...(this.listeners.get(method) ?? [])].map((cb) => () => cb(params));
    for (const cb of this.listeners.get("*") ?? []) calls.push(() => cb(method, params));
    for (const call of calls) {
      // A throwing listener is logged; it stops neither the others nor the reading.
      try { call(); } catch (e) { console.error(e); }
    }
  }

  _settle(m) {
    const p = this.pending.get(m.id);
    if (!p) return; // an error about something unparseable (id null): nobody waits for it
    this.pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.error) p.reject(new RPCError(m.error));
    else p.resolve(m.result);
  }

  _onClose(reason) {
    if (this.isClosed) return;
    this.isClosed = true;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error(`the connection closed${reason ? ": " + reason : ""}`));
    }
    this.pending.clear();
    this._resolveClosed(reason);
  }
}

function message(method, params) {
  const msg = { jsonrpc: "2.0", method };
  if (params !== undefined) msg.params = params;
  return msg;
}

for (const [name, [method, required]] of Object.entries(HELPERS)) {
  Client.prototype[name] = function (params = {}, options) {
    const missing = required.filter((k) => params[k] === undefined);
    if (missing.length) return Promise.reject(new TypeError(`${method} needs ${missing.join(", ")}`));
    return this.call(method, Object.keys(params).length ? params : undefined, options);
  };
}

/**
 * `ws[s]://HOST:PORT/rpc` with the platform's WebSocket (browsers; Node 22+).
 * A browser cannot send an Authorization header, so a paired device's token
 * goes in initialize's auth. Options: {token, initialize = true, WebSocket, timeout, ...initialize params}.
 */
export function connectWebSocket(url, { token, initialize = true, WebSocket: WS = globalThis.WebSocket,
  timeout, ...init } = {}) {
  return new Promise((resolve, reject) => {
    const ws = new WS(url);
    ws.onerror = () => reject(new Error(`cannot connect to ${url}`));
    ws.onopen = () => {
      const client = new Client({
        start(onMessage, onClose) {
          ws.onmessage = (e) => onMessage(e.data);
          ws.onclose = (e) => onClose(e.reason || `closed (${e.code})`);
        },
        send: (text) => ws.send(text),
        close: () => ws.close(),
      }, { timeout });
      if (token) init.auth = { token };
      start(client, initialize, init).then(resolve, reject);
    };
  });
}

/** Initializes a new client (keeping the result as client.initResult); closes it on failure. */
export async function start(client, initialize, init) {
  if (!initialize) return client;
  try {
    client.initResult = await client.initialize(init);
    return client;
  } catch (e) {
    client.close();
    throw e;
  }
}
