/// Questions (AskUserQuestion: questions with header, options, multiSelect).
/// OVERVIEW table: "Question asked" -> in-app display in foreground, push in
/// background. `question.answer` resolves it once.
public struct QuestionRequest: Equatable, Sendable {
    public let questionId: String
    public let sessionId: String
    public let questions: [Question]
    public let createdAt: Millis
    var notificationId: String?
    var bannerShown = false
}

public enum QuestionAnswerStatus: String, Sendable, CaseIterable { case accepted, alreadyResolved, unknown, invalid }

public struct QuestionAnswerResult: Equatable, Sendable {
    public var status: QuestionAnswerStatus
    public var questionId: String
    public var sessionId: String?
    /// For `invalid`: what is wrong with the answers.
    public var problem: String?
}

extension Engine {
    mutating func askQuestion(_ e: AgentEvent, questionId: String, questions: [Question], now: Millis,
                              into effects: inout [Effect]) {
        if state.questionIndex[questionId] != nil || state.answeredQuestions[questionId] != nil { return }
        var q = QuestionRequest(questionId: questionId, sessionId: e.sessionId, questions: questions, createdAt: now)
        state.questionIndex[questionId] = e.sessionId
        let asking = strings["operation.asking"]
        let session = withSession(e.sessionId, now: now) { s -> Session in
            if s.run != .running { s.run = .running; if s.startedAt == nil { s.startedAt = now } }
            s.message = nil
            s.operation = asking // not "Starting": what Claude does is ask
            return s
        }
        let link = DeepLink.question(sessionId: e.sessionId, questionId: questionId)
        let first = questions.first?.question ?? ""
        if state.app.isBackground {
            let id = "question:\(questionId)"
            let body = Privacy.lockScreenText(first, generic: strings["notification.question.body.generic"],
                                              settings: state.settings, services: services)
            let n = makeNotification(id: id, title: strings["notification.question.title"], body: body,
                                     category: .question, event: .questionAsked, sound: true,
                                     actions: openAppAction(), session: session, link: link,
                                     extra: ["questionId": questionId])
            if push(n, sentAt: e.sentAt, now: now, into: &effects) { q.notificationId = id }
        } else {
            effects.append(.showBanner(Banner(
                id: "question:\(questionId)", style: .question, title: strings["notification.question.title"],
                body: Privacy.inAppText(first, services: services), sessionId: e.sessionId, deepLink: link.url,
                actions: [])))
            q.bannerShown = true
        }
        withSession(e.sessionId, now: now) { s in
            s.pendingQuestions.append(q)
            s.recomputeStatus()
        }
        effects.append(.sessionChanged(sessionId: e.sessionId))
        startActivity(e.sessionId, now: now, into: &effects)
        refreshActivity(e.sessionId, now: now, into: &effects)
    }

    /// `answers`: question text or header -> chosen labels (free text allowed,
    /// AskUserQuestion's "Other"). Every question must be answered; single-select
    /// questions take exactly one answer.
    mutating func answer(questionId: String, answers: [String: [String]], deviceId: String?, now: Millis,
                         into effects: inout [Effect]) -> QuestionAnswerResult {
        guard let sid = state.questionIndex[questionId],
              let idx = state.sessions[sid]?.pendingQuestions.firstIndex(where: { $0.questionId == questionId }) else {
            let status: QuestionAnswerStatus = state.answeredQuestions[questionId] != nil ? .alreadyResolved : .unknown
            return QuestionAnswerResult(status: status, questionId: questionId, sessionId: nil, problem: nil)
        }
        let req = state.sessions[sid]!.pendingQuestions[idx]
        if let problem = Engine.validate(answers, for: req.questions) {
            return QuestionAnswerResult(status: .invalid, questionId: questionId, sessionId: sid, problem: problem)
        }
        state.questionIndex[questionId] = nil
        state.answeredQuestions.set(questionId, sid)
        withSession(sid, now: now) { s in
            s.pendingQuestions.remove(at: idx)
            s.record(HistoryEntry(at: now, kind: .answered, id: questionId, toolName: "AskUserQuestion", by: deviceId))
            s.lastActivityAt = now
            s.recomputeStatus()
        }
        effects.append(.clearNotifications(ids: ["question:\(questionId)"]))
        effects.append(.questionAnswered(questionId: questionId, sessionId: sid, answers: answers, by: deviceId))
        effects.append(.sessionChanged(sessionId: sid))
        deviceInteracted(sid, device: deviceId, now: now, into: &effects)
        refreshActivity(sid, now: now, into: &effects)
        return QuestionAnswerResult(status: .accepted, questionId: questionId, sessionId: sid, problem: nil)
    }

    static func validate(_ answers: [String: [String]], for questions: [Question]) -> String? {
        var matched = Set<Int>()
        for (key, values) in answers {
            guard let i = questions.firstIndex(where: { $0.question == key || $0.header == key }) else {
                return "no question matches '\(key)'"
            }
            if values.isEmpty || values.contains(where: \.isEmpty) { return "answer to '\(key)' is empty" }
            if !questions[i].multiSelect && values.count != 1 {
                return "'\(key)' takes exactly one answer (multiSelect is false), got \(values.count)"
            }
            matched.insert(i)
        }
        if let missing = questions.indices.first(where: { !matched.contains($0) }) {
            return "question '\(questions[missing].header ?? questions[missing].question)' is not answered"
        }
        return nil
    }

    /// A question that no longer matters (task ended).
    mutating func dropQuestions(_ sid: String, now: Millis, into effects: inout [Effect]) {
        guard let qs = state.sessions[sid]?.pendingQuestions, !qs.isEmpty else { return }
        for q in qs {
            state.questionIndex[q.questionId] = nil
            state.answeredQuestions.set(q.questionId, sid)
            state.sessions[sid]!.record(HistoryEntry(at: now, kind: .questionCancelled, id: q.questionId,
                                                     toolName: "AskUserQuestion", by: nil))
        }
        state.sessions[sid]!.pendingQuestions.removeAll()
        effects.append(.clearNotifications(ids: qs.map { "question:\($0.questionId)" }))
    }
}
