// An agent's question (AskUserQuestion): each question's options as buttons,
// free text beside them, one "Send" for all. question.answer takes, per
// question text, the chosen label (or labels, multi-select) or the typed text.
import { h } from "./dom.js";
import { RPCError } from "./codingbridge.js";

export function questionForm(q, app) {
  const picks = q.questions.map(() => new Set());
  const texts = q.questions.map(() => h("input", { type: "text", autocomplete: "off" }));
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "question", "aria-label": "Question from the agent" },
    q.questions.map((item, i) => fieldset(item, i, picks[i], texts[i], q.questionId)),
    error,
    h("button", { type: "submit", class: "send" }, "Send"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const answers = {};
    q.questions.forEach((item, i) => {
      const chosen = [...picks[i]];
      const typed = texts[i].value.trim();
      if (typed) chosen.push(typed);
      if (chosen.length) answers[item.question] = item.multiSelect ? chosen : chosen[chosen.length - 1];
    });
    if (Object.keys(answers).length < q.questions.length) {
      error.textContent = "Answer every question first.";
      return;
    }
    const c = app.client();
    if (!c) { error.textContent = "Not connected: send it when the connection is back."; return; }
    try {
      const r = await c.questionAnswer({ questionId: q.questionId, answers });
      if (r.status === "alreadyResolved") app.say("That question was already answered elsewhere.");
    } catch (e) {
      error.textContent = e instanceof RPCError ? e.rpcMessage : "Not sent: the connection went.";
    }
  });
  return form;
}

function fieldset(item, i, picked, text, qid) {
  const id = `q-${qid}-${i}`.replace(/[^\w-]/g, "_");
  const options = (item.options ?? []).map((o) => {
    const b = h("button", { type: "button", class: "option", "aria-pressed": "false",
      title: o.description ?? undefined }, o.label);
    b.addEventListener("click", () => {
      if (!item.multiSelect) {
        picked.clear();
        for (const other of b.parentNode.children) other.setAttribute("aria-pressed", "false");
      }
      if (picked.has(o.label)) picked.delete(o.label); else picked.add(o.label);
      b.setAttribute("aria-pressed", String(picked.has(o.label)));
    });
    return b;
  });
  text.id = id;
  return h("fieldset", {},
    h("legend", {}, item.question),
    h("div", { class: "options" }, options),
    h("label", { for: id }, options.length ? "Or type an answer" : "Your answer"),
    text);
}
