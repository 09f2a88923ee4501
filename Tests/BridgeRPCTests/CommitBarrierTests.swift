import BridgeCore
import BridgeRPC
import Glibc
import Testing

/// Every reply of a method that changes durable state leaves only after the
/// commit that holds the change: observed directly, with the loop's turn end
/// driven by hand. Before the turn ends nothing of the reply was written;
/// after it, the reply is there and the commit count moved.
@Suite struct CommitBarrierTests {
    final class Server {
        let server: RPCServer
        let client: InProcessClient
        var store: Store { server.env.store! }
        private var nextID: Int64 = 1

        init(_ dir: TempStateDir, alwaysWaitForApproval: Bool = false) throws {
            server = try makeStoreServer(dir, alwaysWaitForApproval: alwaysWaitForApproval)
            client = server.makeInProcessClient()
            _ = client.request("initialize", ["deviceId": "phone", "capabilities": ["notifications": false]])
        }

        /// Sends a request; returns its id and whatever came back at once.
        func send(_ method: String, _ params: JSON) -> (Int64, [JSON]) {
            let id = nextID
            nextID += 1
            return (id, client.sendRequest(id, method, params))
        }

        /// The reply to `id` must wait for the commit; after it, it must be there.
        func expectAfterCommit(_ method: String, _ params: JSON, sourceLocation: SourceLocation = #_sourceLocation) {
            let commits = store.commitCount
            let (id, early) = send(method, params)
            #expect(!early.contains { $0["id"] == .int(id) }, "\(method): replied before its commit", sourceLocation: sourceLocation)
            #expect(store.hasPendingTurn, "\(method): nothing to commit", sourceLocation: sourceLocation)
            #expect(store.endTurn() == nil, sourceLocation: sourceLocation)
            #expect(store.commitCount == commits + 1, "\(method): the commit wrote nothing", sourceLocation: sourceLocation)
            let reply = client.messages(client.takeOutput()).first { $0["id"] == .int(id) }
            #expect(reply?["result"] != nil, "\(method): \(reply?.serialized() ?? "no reply after the commit")", sourceLocation: sourceLocation)
        }
    }

    @Test func everyDurableSyncMethodRepliesAfterItsCommit() throws {
        let dir = TempStateDir("cb-barrier")
        let s = try Server(dir)
        s.expectAfterCommit("agent.event", ["sessionId": "s1", "type": "task_started", "projectPath": "/w/app"])
        s.expectAfterCommit("agent.event", ["sessionId": "s1", "type": "question", "questionId": "q1",
                                            "questions": [["question": "Which?", "header": "DB",
                                                           "options": [["label": "A"], ["label": "B"]], "multiSelect": false]]])
        s.expectAfterCommit("question.answer", ["questionId": "q1", "answers": ["DB": "A"]])
        s.expectAfterCommit("agent.event", ["sessionId": "s1", "type": "approval_request", "requestId": "r1",
                                            "toolName": "Bash", "input": ["command": "make"]])
        s.expectAfterCommit("approval.respond", ["requestId": "r1", "decision": "allow"])
        s.expectAfterCommit("app.update", ["phase": "background"])
        s.expectAfterCommit("settings.update", ["showNotificationDetails": true])
        s.expectAfterCommit("agent.hook", ["session_id": "s2", "hook_event_name": "UserPromptSubmit", "cwd": "/w/app", "prompt": "go"])
        s.expectAfterCommit("agent.streamJson", ["type": "system", "subtype": "init", "cwd": "/w/app", "session_id": "s3"])
        s.expectAfterCommit("agent.claudecodeui", ["type": "session-created", "sessionId": "s4"])
        s.expectAfterCommit("message.send", ["sessionId": "s1", "text": "hello"])
        s.expectAfterCommit("draft.save", ["sessionId": "s1", "text": "half a thought"])
        s.expectAfterCommit("draft.clear", ["sessionId": "s1"])
        s.expectAfterCommit("connection.update", ["state": "disconnected"])
        s.expectAfterCommit("agent.event", ["sessionId": "s1", "type": "approval_request", "requestId": "r2",
                                            "toolName": "Bash", "input": ["command": "make"]])
        // Offline: the decision is queued durably (an outbox row) before "queued" is said.
        s.expectAfterCommit("approval.respond", ["requestId": "r2", "decision": "deny"])
        let listed = s.send("outbox.list", [:]).1.first { $0["id"] != nil }
        let row = try #require(listed?["result"]?["messages"]?.arrayValue?.first?["id"])
        s.expectAfterCommit("outbox.fail", ["id": row, "error": "link down", "retry": true])
        s.expectAfterCommit("outbox.ack", ["id": row])
    }

    /// The async path: a hook's PermissionRequest is answered when a person
    /// decides, and that answer too waits for the commit of the decision.
    @Test func theHookAnswerWaitsForTheCommitOfTheDecision() throws {
        let dir = TempStateDir("cb-barrier")
        // The test's own client takes no notifications: nobody else could
        // answer, so the approval waits only on request.
        let s = try Server(dir, alwaysWaitForApproval: true)
        let hook = s.server.makeInProcessClient()
        let ask: JSON = ["jsonrpc": "2.0", "id": 99, "method": "agent.hook",
                         "params": ["session_id": "s9", "hook_event_name": "PermissionRequest", "cwd": "/w/app",
                                    "tool_name": "Bash", "tool_input": ["command": "make deploy"]]]
        #expect(!hook.messages(hook.send(ask.serialized() + "\n")).contains { $0["id"] == 99 })
        #expect(s.store.endTurn() == nil)
        #expect(!hook.messages(hook.takeOutput()).contains { $0["id"] == 99 }, "answered before anyone decided")
        let list = s.send("approval.list", [:]).1.first { $0["id"] != nil }
        let rid = try #require(list?["result"]?["approvals"]?.arrayValue?.first?["requestId"])
        let commits = s.store.commitCount
        let (id, early) = s.send("approval.respond", ["requestId": rid, "decision": "allow"])
        #expect(!early.contains { $0["id"] == .int(id) })
        #expect(!hook.messages(hook.takeOutput()).contains { $0["id"] == 99 }, "the hook's answer left before the commit")
        #expect(s.store.endTurn() == nil)
        #expect(s.store.commitCount == commits + 1)
        let answer = hook.messages(hook.takeOutput()).first { $0["id"] == 99 }
        #expect(answer?["result"]?["decision"] == "allow")
    }

    /// A commit that fails (disk full) rolls back the turn: the reply is a
    /// -32050, not a result; the change is written again at the next turn
    /// that commits, so a restart finds it.
    @Test func aFailedCommitAnswersWithAnErrorAndTheSnapshotIsWrittenLater() throws {
        let dir = TempStateDir("cb-barrier")
        do {
            let s = try Server(dir)
            try s.store.limitGrowth(pages: 0)
            // A document far bigger than the free space the database has left.
            let path = "/w/" + String(repeating: "deep/", count: 40_000)
            let (id, early) = s.send("agent.event", ["sessionId": "full", "type": "task_started", "projectPath": .string(path)])
            #expect(!early.contains { $0["id"] == .int(id) })
            #expect(s.store.endTurn() != nil, "the commit should fail on a full disk")
            let reply = s.client.messages(s.client.takeOutput()).first { $0["id"] == .int(id) }
            #expect(reply?["error"]?["code"] == -32050, "\(reply?.serialized() ?? "no reply")")
            try s.store.limitGrowth(pages: 1 << 20)
            s.expectAfterCommit("agent.event", ["sessionId": "other", "type": "task_started"])
            s.server.env.store!.flush()
        }
        let again = try Server(dir)
        let got = again.send("session.get", ["sessionId": "full"]).1.first { $0["id"] != nil }
        #expect(got?["result"]?["session"]?["id"] == "full", "\(got?.serialized() ?? "no reply")")
    }
}
