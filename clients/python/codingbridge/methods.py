"""Typed helpers for the main methods of rpc-spec/openrpc.json.

Each helper is named after its method (`approval.respond` ->
`approval_respond`) and takes the method's params in snake_case
(`requestId` -> `request_id`); params left at None are not sent. Every
other method: `client.call("name", {...})`. Results are the spec's result
objects, as dicts. Tests/e2e/test_clients.py checks these against the spec.
"""
from typing import Any, Dict, Literal, Optional

Decision = Literal["allow", "deny"]
Status = Literal["idle", "processing", "awaitingApproval", "awaitingAnswer", "awaitingInput", "completed", "error"]
EventType = Literal["task_started", "tool_use", "progress", "approval_request", "approval_cancelled",
                    "approval_timeout", "question", "task_completed", "task_failed", "session_handoff",
                    "needs_input"]


def _params(**kw):
    return {k: v for k, v in kw.items() if v is not None}


class Methods:
    def call(self, method: str, params: Optional[dict] = None, timeout: Optional[float] = None) -> Any:
        raise NotImplementedError

    def notify(self, method: str, params: Optional[dict] = None) -> None:
        raise NotImplementedError

    # -- lifecycle
    def initialize(self, client_info: Optional[dict] = None, capabilities: Optional[dict] = None,
                   device_id: Optional[str] = None, auth: Optional[dict] = None) -> dict:
        """initialize, then the `initialized` notification. auth: {"token": ...}
        for a paired device on a WebSocket."""
        result = self.call("initialize", _params(
            clientInfo=client_info or {"name": "codingbridge-python", "version": "1"},
            capabilities=capabilities or {}, deviceId=device_id, auth=auth))
        self.notify("initialized", {})
        return result

    def ping(self) -> dict:
        return self.call("ping")

    def shutdown(self) -> None:
        return self.call("shutdown")

    # -- queries
    def session_list(self, status: Optional[Status] = None) -> dict:
        """{sessions: [SessionSummary]}, most recently active first."""
        return self.call("session.list", _params(status=status))

    def session_get(self, session_id: str) -> dict:
        """{session: Session} with pendingApprovals, pendingQuestions, history."""
        return self.call("session.get", _params(sessionId=session_id))

    def approval_list(self, session_id: Optional[str] = None) -> dict:
        """{approvals: [ApprovalRequest]}, oldest first."""
        return self.call("approval.list", _params(sessionId=session_id))

    def activity_get(self) -> dict:
        return self.call("activity.get")

    def settings_get(self) -> dict:
        return self.call("settings.get")

    def metrics_get(self) -> dict:
        return self.call("metrics.get")

    # -- the person's side
    def approval_respond(self, request_id: str, decision: Decision, device_id: Optional[str] = None,
                         source: Optional[Literal["app", "notification", "liveActivity"]] = None,
                         always_allow: Optional[bool] = None, message: Optional[str] = None,
                         interrupt: Optional[bool] = None) -> dict:
        """{status: accepted|queued|alreadyResolved|expired|unknown, ...}. always_allow (with allow): apply
        the request's permissionSuggestions; message, interrupt (with deny): what the agent reads, stop its turn."""
        return self.call("approval.respond", _params(requestId=request_id, decision=decision,
                                                     deviceId=device_id, source=source, alwaysAllow=always_allow,
                                                     message=message, interrupt=interrupt))

    def question_answer(self, question_id: str, answers: Dict[str, Any], device_id: Optional[str] = None) -> dict:
        """answers: question text (or header) -> the chosen label(s) or free text."""
        return self.call("question.answer", _params(questionId=question_id, answers=answers, deviceId=device_id))

    def message_send(self, session_id: str, text: str, idempotency_key: Optional[str] = None,
                     ttl_ms: Optional[int] = None, device_id: Optional[str] = None) -> dict:
        return self.call("message.send", _params(sessionId=session_id, text=text, idempotencyKey=idempotency_key,
                                                 ttlMs=ttl_ms, deviceId=device_id))

    def app_update(self, phase: Optional[Literal["foreground", "inactive", "background"]] = None,
                   low_power_mode: Optional[bool] = None, network: Optional[dict] = None,
                   permissions: Optional[dict] = None, background_time_expired: Optional[bool] = None) -> dict:
        return self.call("app.update", _params(phase=phase, lowPowerMode=low_power_mode, network=network,
                                               permissions=permissions, backgroundTimeExpired=background_time_expired))

    def settings_update(self, **changes: Any) -> dict:
        """Settings by their spec names (approvalTimeoutSeconds=30, ...)."""
        return self.call("settings.update", changes)

    # -- the agent's side
    def agent_event(self, session_id: str, type: EventType, **fields: Any) -> dict:
        """A native event; fields by their spec names (projectName, toolName, input, todos, ...)."""
        return self.call("agent.event", {"sessionId": session_id, "type": type, **fields})

    def agent_hook(self, hook_input: dict, timeout: Optional[float] = None) -> dict:
        """A Claude Code hook input as Claude Code wrote it; a PermissionRequest
        answers once someone decides (give a timeout to match)."""
        return self.call("agent.hook", hook_input, timeout=timeout)

    # -- network devices
    def device_pair(self, code: str, name: Optional[str] = None) -> dict:
        """{deviceId, name, token}: pair this WebSocket client with a one-time code."""
        return self.call("device.pair", _params(code=code, name=name))

    def redact(self, text: str, mode: Optional[Literal["full", "lockScreen"]] = None, labels: Optional[bool] = None,
               show_details: Optional[bool] = None) -> dict:
        return self.call("redact", _params(text=text, mode=mode, labels=labels, showDetails=show_details))
