#!/usr/bin/env node
// Watch sessions and approve from the terminal.
//
//   node examples/watch.mjs                       # the daemon's default socket
//   node examples/watch.mjs --state-dir DIR       # a daemon started with --state-dir DIR
//   node examples/watch.mjs --auto allow --exit-when-done   # unattended (tests, scripts)
//
// Prints a line whenever a session changes; for each approval it asks
// "Allow? [y/N]" (or answers --auto at once).
import path from "node:path";
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";
import { connectUnix } from "../node.js";

const MARKS = { processing: "●", awaitingApproval: "◆", awaitingAnswer: "◆", awaitingInput: "◆", completed: "✓", error: "✗" };

const name = (s) => s.projectName || path.basename(s.projectPath || "") || s.id;

function line(s) {
  const parts = [`${MARKS[s.status] ?? "○"} ${name(s)}`, s.status];
  if (s.operation) parts.push(s.operation);
  if (s.progress) parts.push(`${s.progress.completed}/${s.progress.total}`);
  return parts.join(" · ");
}

async function decide(cb, a, auto) {
  const prompt = `Approve ${a.toolName}: ${a.summary} (${Math.floor(a.remainingSeconds)} s left)? [y/N] `;
  let decision = auto;
  if (auto) {
    console.log(prompt + auto);
  } else {
    const rl = createInterface({ input: process.stdin, output: process.stdout });
    decision = /^y(es)?$/i.test((await rl.question(prompt)).trim()) ? "allow" : "deny";
    rl.close();
  }
  const r = await cb.approvalRespond({ requestId: a.requestId, decision });
  console.log(`${decision}: ${r.status}`);
}

async function main() {
  const { values: opts } = parseArgs({ options: {
    socket: { type: "string" }, "state-dir": { type: "string" },
    auto: { type: "string" }, "exit-when-done": { type: "boolean" },
  } });
  if (opts.auto && !["allow", "deny"].includes(opts.auto)) throw new Error("--auto takes allow or deny");
  let cb;
  try {
    cb = await connectUnix({ path: opts.socket, stateDir: opts["state-dir"], deviceId: "terminal" });
  } catch (e) {
    console.error(`no daemon: ${e.message} (start one: codingbridge serve --listen unix --no-stdio)`);
    process.exit(1);
  }
  // Approvals are asked one at a time, in the order they came.
  const seen = new Set();
  let queue = Promise.resolve();
  const changed = async ({ session: s }) => {
    if (!s) return;
    console.log(line(s));
    if (s.pendingApprovalCount) {
      for (const a of (await cb.approvalList({ sessionId: s.id })).approvals) {
        if (seen.has(a.requestId)) continue;
        seen.add(a.requestId);
        queue = queue.then(() => decide(cb, a, opts.auto)).catch((e) => console.log(`not sent: ${e.message}`));
      }
    }
    if (s.status === "completed" && opts["exit-when-done"]) {
      await queue;
      console.log(`Task Complete: ${name(s)}`);
      await cb.close();
    }
  };
  cb.on("session.changed", changed);
  for (const s of (await cb.sessionList()).sessions) await changed({ session: s });
  const reason = await cb.closed;
  if (!opts["exit-when-done"]) console.error(reason);
}

main().catch((e) => { console.error(e.message); process.exit(1); });
