import BridgeCore
import BridgeEngine

/// Claude Code's Task tools (TaskCreate, TaskUpdate; the deferred tools that
/// replace TodoWrite for some models or with CLAUDE_CODE_ENABLE_TODO_TOOLS)
/// -> the session's plan as progress. Each call changes one task, so the new
/// plan is the session's current one with that change applied; read from
/// PostToolUse, once the tool succeeded and TaskCreate's id is known.
enum ClaudeTaskTools {
    static let names: Set<String> = ["TaskCreate", "TaskUpdate", "TaskList", "TaskGet"]

    /// The plan after one successful Task tool call; nil: the plan did not change.
    static func plan(after name: String, input: [String: JSON], response: JSON?, current: [Todo],
                     into m: inout AgentMapping) -> [Todo]? {
        switch name {
        case "TaskCreate": return created(input, response, current, &m)
        case "TaskUpdate": return updated(input, current, &m)
        default: return nil // TaskList, TaskGet: reads
        }
    }

    private static func created(_ input: [String: JSON], _ response: JSON?, _ current: [Todo],
                                _ m: inout AgentMapping) -> [Todo]? {
        guard let subject = ToolCalls.string(input, "subject", "content", "description") else {
            m.ignore("TaskCreate without a subject")
            return nil
        }
        let id = taskId(in: response)
        if let id, current.contains(where: { $0.id == id }) { return nil } // a repeated hook
        guard current.count < Engine.maxKeptTodos else {
            m.ignore("TaskCreate: the plan already holds \(Engine.maxKeptTodos) tasks; this one is not counted")
            return nil
        }
        return current + [Todo(content: subject, status: .pending, activeForm: ToolCalls.string(input, "activeForm"), id: id)]
    }

    private static func updated(_ input: [String: JSON], _ current: [Todo], _ m: inout AgentMapping) -> [Todo]? {
        guard let id = idString(input["taskId"]) else {
            m.ignore("TaskUpdate without a taskId")
            return nil
        }
        guard let i = current.firstIndex(where: { $0.id == id }) else {
            m.ignore("TaskUpdate for task \(id), which this session's plan does not hold")
            return nil
        }
        var plan = current
        let status = input["status"]?.stringValue
        if status == "deleted" {
            plan.remove(at: i)
            return plan
        }
        if let status {
            guard let st = Todo.State(rawValue: status) else {
                m.ignore("TaskUpdate status '\(status)' is not pending, in_progress, completed or deleted")
                return nil
            }
            plan[i].status = st
        }
        if let subject = ToolCalls.string(input, "subject") { plan[i].content = subject }
        if let form = ToolCalls.string(input, "activeForm") { plan[i].activeForm = form }
        return plan == current ? nil : plan
    }

    /// TaskCreate's result names the new task: `{task: {id}}`, `{id}` or
    /// `{taskId}` (a string or a number), or text such as "Task #3 created".
    static func taskId(in response: JSON?) -> String? {
        guard let response else { return nil }
        if let o = response.objectValue {
            if let t = o["task"], let id = idString(t["id"]) { return id }
            return idString(o["id"]) ?? idString(o["taskId"])
        }
        let text = response.stringValue
            ?? response.arrayValue?.compactMap { $0["text"]?.stringValue }.joined(separator: "\n") ?? ""
        guard let hash = text.firstIndex(of: "#") else { return nil }
        let digits = text[text.index(after: hash)...].prefix { $0.isASCII && $0.isNumber }
        return digits.isEmpty ? nil : String(digits)
    }

    static func idString(_ v: JSON?) -> String? {
        if let s = v?.stringValue, !s.isEmpty { return s }
        if let n = v?.intValue { return String(n) }
        return nil
    }
}
