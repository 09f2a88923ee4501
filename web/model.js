// What the page shows: the daemon's state (session.list, approval.list,
// activity.get, questions from session.get) kept current by its notifications.
const HISTORY = "codingbridge.notifications";
const HISTORY_MAX = 100;

const DECIDED = { allow: "Approved", deny: "Denied", timedOut: "Timed out", cancelled: "Cancelled" };

export class Model {
  /** changed(): called once per burst of changes (a microtask later). */
  constructor(changed) {
    this.changed = changed;
    this.scheduled = false;
    this.sessions = new Map();  // id -> SessionSummary + at (when received, for the ticking clock)
    this.approvals = new Map(); // requestId -> ApprovalRequest + at
    this.questions = new Map(); // questionId -> QuestionRequest
    this.notes = new Map();     // sessionId -> {what, by}: the last answer, and whose
    this.devices = new Map();   // deviceId -> name
    this.history = JSON.parse(localStorage.getItem(HISTORY) || "[]");
    this.me = null;
  }

  touch() {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => { this.scheduled = false; this.changed(); });
  }

  /** The whole state again (first connect and every reconnect). */
  async load(c) {
    this.client = c;
    this.me = c.initResult?.deviceId ?? null;
    const [sl, al, act, dl] = await c.batch([["session.list"], ["approval.list"], ["activity.get"], ["device.list"]]);
    if (sl instanceof Error) throw sl;
    this.sessions = new Map(sl.sessions.map((s) => [s.id, stamp(s)]));
    this.approvals = new Map(al instanceof Error ? [] : al.approvals.map((a) => [a.requestId, stamp(a)]));
    if (!(dl instanceof Error)) this.setDevices(dl.devices);
    if (!(act instanceof Error)) this.activity(act.activity);
    this.questions = new Map();
    const asking = [...this.sessions.values()].filter((s) => s.pendingQuestionCount);
    await Promise.all(asking.map((s) => this.fetchQuestions(s.id)));
    this.loaded = true;
    this.touch();
  }

  watch(c) {
    c.on("session.changed", ({ session }) => this.sessionChanged(session));
    c.on("approval.resolved", (p) => this.approvalResolved(p));
    c.on("question.answered", (p) => this.questionAnswered(p));
    for (const m of ["activity.start", "activity.update", "activity.end"]) c.on(m, (p) => this.activity(p));
    c.on("notification.post", (p) => this.remember(p.title, p.body, p.category));
    c.on("banner.show", (p) => this.remember(p.title, p.body, p.style));
  }

  setDevices(list) {
    this.devices = new Map(list.map((d) => [d.deviceId, d.name]));
    this.mine = list.find((d) => d.deviceId === this.me) ?? null; // this browser's device (its push registrations)
    this.touch();
  }

  deviceName(id) {
    if (!id) return null;
    if (id === this.me) return "this device";
    return this.devices.get(id) ?? id;
  }

  sessionChanged(s) {
    if (!s) { this.reloadSessions(); return; }
    const known = (map) => [...map.values()].filter((x) => x.sessionId === s.id).length;
    this.sessions.set(s.id, stamp(s));
    if (s.pendingApprovalCount !== known(this.approvals)) this.fetchApprovals(s.id);
    if (s.pendingQuestionCount !== known(this.questions)) this.fetchQuestions(s.id);
    this.touch();
  }

  async reloadSessions() {
    const r = await this.client.sessionList().catch(() => null);
    if (r) this.sessions = new Map(r.sessions.map((x) => [x.id, stamp(x)]));
    this.touch();
  }

  async fetchApprovals(sessionId) {
    const r = await this.client.approvalList({ sessionId }).catch(() => null);
    if (!r) return;
    for (const [k, a] of this.approvals) if (a.sessionId === sessionId) this.approvals.delete(k);
    for (const a of r.approvals) this.approvals.set(a.requestId, stamp(a));
    this.touch();
  }

  async fetchQuestions(sessionId) {
    const r = await this.client.sessionGet({ sessionId }).catch(() => null);
    if (!r) return;
    for (const [k, q] of this.questions) if (q.sessionId === sessionId) this.questions.delete(k);
    for (const q of r.session.pendingQuestions) this.questions.set(q.questionId, q);
    this.touch();
  }

  approvalResolved({ requestId, sessionId, decision, by, alwaysAllow, interrupt }) {
    const a = this.approvals.get(requestId);
    this.approvals.delete(requestId);
    const what = alwaysAllow ? "Always allowed" : interrupt ? "Denied and stopped" : DECIDED[decision] ?? decision;
    this.note(sessionId, `${a ? `${a.toolName}: ` : ""}${what}`, by);
  }

  questionAnswered({ questionId, sessionId, by }) {
    this.questions.delete(questionId);
    this.note(sessionId, "Question answered", by);
  }

  /** "Approved on Phone B": a device paired after this page loaded is looked up first. */
  note(sessionId, what, by) {
    this.notes.set(sessionId, { what, by });
    if (by && by !== this.me && !this.devices.has(by)) {
      this.client.call("device.list").then((r) => this.setDevices(r.devices), () => {});
    }
    this.touch();
  }

  noteText(sessionId) {
    const n = this.notes.get(sessionId);
    if (!n) return "";
    const who = this.deviceName(n.by);
    return who ? `${n.what} on ${who}` : n.what;
  }

  /** The Live Activity carries the operation line, which session.changed leaves out. */
  activity(a) {
    const s = a && this.sessions.get(a.sessionId);
    if (!s) return;
    s.operation = a.operation;
    if (a.progress) s.progress = { ...a.progress, text: a.progressText ?? undefined };
    this.touch();
  }

  remember(title, body, kind) {
    this.history.unshift({ at: Date.now(), title, body, kind });
    this.history.length = Math.min(this.history.length, HISTORY_MAX);
    localStorage.setItem(HISTORY, JSON.stringify(this.history));
    this.touch();
  }

  forget() { localStorage.removeItem(HISTORY); this.history = []; }

  sorted() {
    return [...this.sessions.values()].sort((a, b) => b.lastActivityAt - a.lastActivityAt);
  }
}

/** Keeps when a value arrived: clocks and countdowns run from there, not from the daemon's clock. */
function stamp(x) { return { ...x, at: performance.now() }; }
