// One card per session, most recently active first: status, operation,
// progress, elapsed time, and what waits for the person (approvals, questions).
import { h, clock, reconcile } from "./dom.js";
import { makeApproval, updateApproval } from "./approval.js";
import { questionForm } from "./question.js";
import { composer } from "./compose.js";

const STATUS = {
  idle: ["idle", "Idle"],
  processing: ["working", "Working"],
  awaitingApproval: ["waiting", "Waiting for approval"],
  awaitingAnswer: ["waiting", "Waiting for an answer"],
  awaitingInput: ["waiting", "Needs you in the terminal"],
  completed: ["done", "Done"],
  error: ["error", "Error"],
};
const TICKING = new Set(["processing", "awaitingApproval", "awaitingAnswer", "awaitingInput"]);

/** app: {model, decisions, client(), say} */
export function renderCards(list, app) {
  const sessions = app.model.sorted();
  document.getElementById("no-sessions").hidden = sessions.length > 0;
  reconcile(list, sessions, (s) => s.id, (s) => makeCard(s, app), (el, s) => updateCard(el, s, app));
}

function makeCard(s, app) {
  const title = `t-${s.id}`.replace(/[^\w-]/g, "_");
  return h("li", { class: "card" },
    h("article", { "aria-labelledby": title },
      h("div", { class: "head" },
        h("h3", { id: title, class: "project" }),
        h("p", { class: "status" },
          h("span", { class: "dot", "aria-hidden": "true" }), h("span", { class: "label" }))),
      h("p", { class: "path" }),
      h("p", { class: "op" }),
      h("p", { class: "meta" }, h("span", { class: "progress" }), h("span", { class: "elapsed" })),
      h("p", { class: "note", role: "status" }),
      h("div", { class: "approvals" }),
      h("div", { class: "questions" }),
      composer(s, app)));
}

function updateCard(el, s, app) {
  const [tone, label] = STATUS[s.status] ?? ["idle", s.status];
  el.item = s;
  el.dataset.status = tone;
  const name = s.projectName ?? s.projectPath?.split("/").pop() ?? s.id;
  el.querySelector(".project").textContent = name;
  el.querySelector(".label").textContent = label;
  el.querySelector(".path").textContent = s.projectPath ?? "";
  el.querySelector(".op").textContent = s.operation ?? s.message ?? "";
  const p = s.progress;
  el.querySelector(".progress").textContent = p ? (p.text ?? `${p.completed} of ${p.total} tasks`) : "";
  el.querySelector(".note").textContent = app.model.noteText(s.id);
  tick(el);
  const approvals = [...app.model.approvals.values()].filter((a) => a.sessionId === s.id);
  reconcile(el.querySelector(".approvals"), approvals, (a) => a.requestId, (a) => makeApproval(a, app),
    (ael, a) => { updateApproval(ael, a, app); tick(ael); });
  const questions = [...app.model.questions.values()].filter((q) => q.sessionId === s.id);
  reconcile(el.querySelector(".questions"), questions, (q) => q.questionId, (q) => questionForm(q, app), () => {});
}

/** Every second: elapsed time of working sessions, countdowns of approvals. */
export function tick(el) {
  const x = el.item;
  const since = (performance.now() - x.at) / 1000;
  if (x.requestId) {
    el.querySelector(".countdown").textContent = `Expires in ${clock(x.remainingSeconds - since)}`;
    return;
  }
  if (x.elapsedSeconds == null) return;
  const secs = x.elapsedSeconds + (TICKING.has(x.status) ? since : 0);
  const e = el.querySelector(".elapsed");
  e.textContent = clock(secs);
  e.setAttribute("aria-label", `Elapsed ${clock(secs)}`);
}

export function tickAll(list) {
  for (const el of list.querySelectorAll(".card, .approval")) if (el.item) tick(el);
}
