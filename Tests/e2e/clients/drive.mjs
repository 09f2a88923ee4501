// The JS client (clients/js) end to end, run by Tests/e2e/test_clients.py:
//   node drive.mjs stdio BIN       a server of our own over stdio (node.js)
//   node drive.mjs ws URL TOKEN    a paired device over the platform WebSocket
//                                  (codingbridge.js, as a browser runs it)
// Prints one JSON object: each call's method and result (or error), and the
// notifications received, for the test to check against the spec.
import { connectStdio, connectWebSocket } from "../../../clients/js/node.js";

const [mode, a, b] = process.argv.slice(2);
const calls = [];
const notes = [];

async function record(method, promise) {
  try {
    calls.push({ method, result: await promise });
  } catch (e) {
    calls.push({ method, error: { code: e.code, message: e.rpcMessage, data: e.data } });
  }
}

const cb = mode === "stdio"
  ? await connectStdio({ command: a, args: ["--ephemeral"], stderr: "ignore", deviceId: "js-test" })
  : await connectWebSocket(a, { token: b });
cb.on("*", (method, params) => notes.push({ method, params }));
calls.push({ method: "initialize", result: cb.initResult });
await record("agent.event", cb.agentEvent({ sessionId: "js-1", type: "task_started", projectName: "MyApp" }));
await record("agent.event", cb.agentEvent({ sessionId: "js-1", type: "approval_request", requestId: "r1",
  toolName: "Bash", input: { command: "npm publish" } }));
await record("approval.list", cb.approvalList());
await record("approval.respond", cb.approvalRespond({ requestId: "r1", decision: "deny" }));
const batch = await cb.batch([["session.list", {}], ["session.get", { sessionId: "nobody" }], ["ping"]]);
calls.push({ method: "session.list", result: batch[0] });
calls.push({ method: "session.get", error: { code: batch[1].code, message: batch[1].rpcMessage } });
calls.push({ method: "ping", result: batch[2] });
await cb.close();
console.log(JSON.stringify({ calls, notes }));
