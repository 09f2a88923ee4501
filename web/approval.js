// An approval on a session's card: Approve, Deny, a countdown, and the richer
// decisions when the daemon has them: "Always allow" (the request's
// permission suggestions, applied by the agent from then on) and "Deny with
// message" (a message to Claude, and whether to stop it).
import { h } from "./dom.js";
import { SAVED } from "./decide.js";

const WHERE = {
  session: "for this session", localSettings: "in this project, on this computer",
  projectSettings: "in this project", userSettings: "in every project",
};

/** One permission suggestion in words: "Bash(npm test:*)", "directory ~/x", "mode acceptEdits". */
function suggestionText(s) {
  let what;
  if (Array.isArray(s.rules)) what = s.rules.map((r) => (r.ruleContent ? `${r.toolName}(${r.ruleContent})` : r.toolName)).join(", ");
  else if (Array.isArray(s.directories)) what = `directory ${s.directories.join(", ")}`;
  else if (s.mode) what = `mode ${s.mode}`;
  else what = s.type ?? "a permission";
  const verb = s.type === "removeRules" || s.type === "removeDirectories" ? "remove " : "";
  const where = WHERE[s.destination] ? ` ${WHERE[s.destination]}` : "";
  return `${verb}${what}${where}`;
}

export function makeApproval(a, app) {
  const key = `a-${a.requestId}`.replace(/[^\w-]/g, "_");
  const decide = (d, extra) => app.decisions.respond(app.client(), a, d, extra);
  const suggestions = a.permissionSuggestions ?? [];
  const rule = suggestions.map(suggestionText).join("; ");
  const always = suggestions.length
    ? h("button", { type: "button", class: "always", title: `Allow this, and from now on: ${rule}`,
      "aria-describedby": `${key}-rule`, onclick: () => decide("allow", { alwaysAllow: true }) }, "Always allow")
    : null;
  // the daemon of the richer decisions lists permissionSuggestions on every approval (empty when none)
  const rich = Array.isArray(a.permissionSuggestions);
  const form = rich ? denyForm(key, (extra) => decide("deny", extra)) : null;
  const more = rich ? h("button", { type: "button", class: "deny more", "aria-expanded": "false", "aria-controls": `${key}-deny`,
    onclick: () => toggle(more, form) }, "Deny with message") : null;
  return h("div", { class: "approval", role: "group", "aria-label": `Approval needed: ${a.toolName}` },
    h("p", {}, h("strong", { class: "tool" }, a.toolName), " ", h("span", { class: "summary" }, a.summary)),
    h("p", { class: "countdown" }),
    h("p", { class: "saved", hidden: true }, SAVED),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "approve", onclick: () => decide("allow") }, "Approve"),
      h("button", { type: "button", class: "deny", onclick: () => decide("deny") }, "Deny")),
    rich ? h("div", { class: "actions secondary" }, always, more) : null,
    always ? h("p", { class: "rule", id: `${key}-rule` }, `Always allow: ${rule}`) : null,
    form);
}

function toggle(button, form) {
  const open = form.hidden;
  form.hidden = !open;
  button.setAttribute("aria-expanded", String(open));
  if (open) form.querySelector("textarea").focus();
}

function denyForm(key, send) {
  const text = h("textarea", { id: `${key}-msg`, rows: "2", maxlength: "1000", required: true });
  const stop = h("input", { type: "checkbox", id: `${key}-stop` });
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "deny-message", id: `${key}-deny`, "aria-label": "Deny with message", hidden: true },
    h("label", { for: `${key}-msg` }, "Message to Claude"),
    text,
    h("p", { class: "toggle" }, stop, h("label", { for: `${key}-stop` }, "Stop Claude")),
    error,
    h("button", { type: "submit", class: "deny" }, "Send"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const message = text.value.trim();
    if (!message) { error.textContent = "Write a message first (or use Deny)."; return; }
    error.textContent = "";
    send(stop.checked ? { message, interrupt: true } : { message });
  });
  return form;
}

export function updateApproval(el, a, app) {
  el.item = a;
  const saved = app.decisions.pending(a.requestId);
  el.querySelector(".saved").hidden = !saved;
  for (const b of el.querySelectorAll("button")) b.disabled = saved;
}
