// Approve and Deny, including decisions made while the daemon cannot be
// reached. The daemon queues a decision itself while connection.update says
// its backend link is down (status "queued"); a browser that cannot reach the
// daemon at all keeps the decision here (localStorage, so a reload keeps it
// too) and sends it, in the order made, as soon as it is connected again. The
// daemon then rules as always: the first decision wins, one for a request
// that timed out meanwhile is "expired" and is reported as not sent.
import { RPCError } from "./codingbridge.js";

const QUEUE = "codingbridge.queue";
export const SAVED = "Saved. It will be sent when the connection is back.";

export class Decisions {
  /** say(text): tells the person (a live region). */
  constructor(model, say) {
    this.model = model;
    this.say = say;
    this.queue = JSON.parse(localStorage.getItem(QUEUE) || "[]");
    this.serverQueued = new Set(); // requestIds the daemon holds until its link is back
  }

  /** A decision not yet delivered: the card shows it saved, and further taps do nothing. */
  pending(requestId) {
    return this.serverQueued.has(requestId) || this.queue.some((d) => d.requestId === requestId);
  }

  /** extra: approval.respond's other params (alwaysAllow, message, interrupt, source). */
  async respond(client, a, decision, extra = {}) {
    if (this.pending(a.requestId)) return;
    if (!client) return this.enqueue(a, decision, extra);
    try {
      this.outcome(a, await client.approvalRespond({ requestId: a.requestId, decision, ...extra }));
    } catch (e) {
      if (e instanceof RPCError) this.say(`${a.toolName}: not sent (${e.rpcMessage})`);
      else this.enqueue(a, decision, extra); // the connection went while it was on its way
    }
  }

  enqueue(a, decision, extra) {
    const left = a.remainingSeconds * 1000 - (performance.now() - a.at);
    this.queue.push({ requestId: a.requestId, sessionId: a.sessionId, toolName: a.toolName, decision, extra,
      expiresAt: Date.now() + left });
    this.save();
    this.say(`${a.toolName}: ${SAVED}`);
  }

  /** Sends what was decided offline, oldest first; stops if the connection goes again. */
  async flush(client) {
    while (this.queue.length) {
      const d = this.queue[0];
      let r = null;
      if (d.expiresAt > Date.now()) {
        try {
          r = await client.approvalRespond({ requestId: d.requestId, decision: d.decision, ...d.extra });
        } catch (e) {
          if (!(e instanceof RPCError)) return;
        }
      }
      this.queue.shift();
      this.save();
      this.outcome(d, r ?? { status: "expired" });
    }
  }

  outcome(a, r) {
    const tool = a.toolName;
    if (r.status === "queued") {
      this.serverQueued.add(a.requestId);
      this.say(`${tool}: ${SAVED}`);
    } else if (r.status === "alreadyResolved") {
      this.say(`${tool}: already answered elsewhere (${r.resolution ?? "resolved"}); yours was not used.`);
    } else if (r.status === "expired" || r.status === "unknown") {
      this.say(`Decision Not Sent: ${tool} timed out before it could be sent.`);
    }
    if (r.status !== "queued") this.serverQueued.delete(a.requestId);
    this.model.touch();
  }

  save() {
    localStorage.setItem(QUEUE, JSON.stringify(this.queue));
    this.model.touch();
  }

  forget() { this.queue = []; localStorage.removeItem(QUEUE); }
}
