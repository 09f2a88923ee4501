/// App input (`app.update`) and settings changes: phase (foreground /
/// background), Low Power Mode, network, permissions; BACKGROUND-TASKS
/// "handleReturnToForeground" and EDGE-CASES "Low Power Mode", "Notification
/// Permission Denied", "Live Activities Disabled".
extension Engine {
    mutating func handleApp(_ u: AppUpdate, now: Millis, into effects: inout [Effect]) {
        let old = state.app
        if let p = u.phase { state.app.phase = p }
        if let l = u.lowPowerMode { state.app.lowPowerMode = l }
        if let c = u.networkConnected { state.app.networkConnected = c }
        if let t = u.networkType { state.app.networkType = t }
        if let n = u.notificationPermission { state.app.notificationPermission = n }
        if let a = u.liveActivitiesPermitted { state.app.liveActivitiesPermitted = a }
        if let d = u.deviceId { state.app.device = d }
        let app = state.app

        if liveActivityStatus != .available, state.activity != nil {
            endActivity(now: now, into: &effects)
        }
        if !old.isBackground && app.isBackground {
            enterBackground(now: now, into: &effects)
            connectivityCheckOnBackground(now: now, into: &effects)
        }
        if old.isBackground && !app.isBackground { enterForeground(now: now, into: &effects) }
        if !app.lowPowerMode { state.lowPowerNotified = false }
        lowPowerCheck(now: now, into: &effects)
        if u.backgroundTimeExpired { backgroundTimeExpired(now: now, into: &effects) }
    }

    /// BACKGROUND-TASKS "When user backgrounds app during processing": start the
    /// Live Activity immediately; anything still waiting for the person that was
    /// only shown in-app is pushed now, so leaving the app never hides it.
    mutating func enterBackground(now: Millis, into effects: inout [Effect]) {
        if state.sessions.values.contains(where: { $0.run == .running }) {
            state.metrics.count(.backgroundTaskStarted)
        }
        if let sid = mostRecentActiveSession() { startActivity(sid, now: now, into: &effects) }
        let waiting = state.sessions.values.filter { !$0.pendingApprovals.isEmpty || !$0.pendingQuestions.isEmpty }
            .map(\.id).sorted()
        for sid in waiting {
            let session = state.sessions[sid]!
            for (i, r) in session.pendingApprovals.enumerated() where r.notificationId == nil {
                let id = "approval:\(r.requestId)"
                let n = makeNotification(id: id, title: strings["notification.approval.title"], body: approvalBody(r.tool),
                                         category: .approval, event: .approvalNeeded, sound: true,
                                         actions: approvalActions(), session: session,
                                         link: .approval(sessionId: sid, requestId: r.requestId),
                                         extra: ["requestId": r.requestId, "toolName": r.tool.name])
                if push(n, sentAt: nil, now: now, into: &effects) { state.sessions[sid]!.pendingApprovals[i].notificationId = id }
            }
            for (i, q) in session.pendingQuestions.enumerated() where q.notificationId == nil {
                let id = "question:\(q.questionId)"
                let body = Privacy.lockScreenText(q.questions.first?.question, generic: strings["notification.question.body.generic"],
                                                  settings: state.settings, services: services)
                let n = makeNotification(id: id, title: strings["notification.question.title"], body: body,
                                         category: .question, event: .questionAsked, sound: true, actions: openAppAction(),
                                         session: session, link: .question(sessionId: sid, questionId: q.questionId),
                                         extra: ["questionId": q.questionId])
                if push(n, sentAt: nil, now: now, into: &effects) { state.sessions[sid]!.pendingQuestions[i].notificationId = id }
            }
        }
    }

    /// Back in the app: the activity ends if its session is idle; what could not
    /// be shown while away becomes one banner; open approvals get their banner.
    mutating func enterForeground(now: Millis, into effects: inout [Effect]) {
        if let a = state.activity, state.sessions[a.sessionId]?.isActive != true {
            endActivity(now: now, into: &effects)
        }
        if state.missedWhileAway > 0 {
            // "Approval Needed (2), Task Complete (1)": each kind by the title
            // its notification would have had.
            let what = NotificationCategory.allCases.compactMap { c in
                state.missedByCategory[c].map { "\(strings[c.titleKey]) (\($0))" }
            }.joined(separator: ", ")
            let n = String(state.missedWhileAway)
            let body = what.isEmpty ? strings.format("banner.missed.body.count", n) : strings.format("banner.missed.body", n, what)
            state.missedWhileAway = 0
            state.missedByCategory = [:]
            effects.append(.showBanner(Banner(id: nextId("missed", "app"), style: .info, title: strings["banner.missed.title"],
                                              body: body, sessionId: nil,
                                              deepLink: DeepLink.notificationSettings.url, actions: [])))
        }
        for r in pendingApprovals where !(state.sessions[r.sessionId]?.pendingApprovals.first { $0.requestId == r.requestId }?.bannerShown ?? true) {
            effects.append(.showBanner(Banner(
                id: "approval:\(r.requestId)", style: .approval, title: strings["notification.approval.title"],
                body: Privacy.inAppText("\(r.tool.name): \(r.tool.detail)", services: services), sessionId: r.sessionId,
                deepLink: DeepLink.approval(sessionId: r.sessionId, requestId: r.requestId).url, actions: approvalActions())))
            if let i = state.sessions[r.sessionId]?.pendingApprovals.firstIndex(where: { $0.requestId == r.requestId }) {
                state.sessions[r.sessionId]!.pendingApprovals[i].bannerShown = true
            }
        }
    }

    /// EDGE-CASES "Low Power Mode": in background without
    /// backgroundInLowPowerMode, extended work stops (`background.end`, the
    /// seeds' endBackgroundTask); say so once per episode.
    mutating func lowPowerCheck(now: Millis, into effects: inout [Effect]) {
        let app = state.app
        guard app.lowPowerMode, app.isBackground, !state.settings.backgroundInLowPowerMode, !state.lowPowerNotified,
              let sid = state.sessions.values.filter({ $0.run == .running }).max(by: { $0.lastActivityAt < $1.lastActivityAt })?.id
        else { return }
        state.lowPowerNotified = true
        effects.append(.endBackgroundWork(reason: .lowPowerMode, sessionId: sid))
        let n = makeNotification(id: nextId("low-power", sid), title: strings["notification.low_power.title"],
                                 body: strings["notification.low_power.body"], category: .lowPowerMode, event: nil,
                                 level: .active, sound: false, actions: [], session: state.sessions[sid]!,
                                 link: .session(id: sid))
        push(n, sentAt: nil, now: now, into: &effects)
    }

    /// BACKGROUND-TASKS "handleTaskExpiration": activity says paused, "Task Paused" push.
    mutating func backgroundTimeExpired(now: Millis, into effects: inout [Effect]) {
        state.metrics.count(.backgroundTaskExpired)
        guard state.app.isBackground, let sid = mostRecentActiveSession() else { return }
        let text = strings["activity.paused"]
        withSession(sid, now: now) { s in s.message = text }
        refreshActivity(sid, now: now, into: &effects)
        let n = makeNotification(id: nextId("paused", sid), title: strings["notification.paused.title"],
                                 body: strings["notification.paused.body"], category: .taskPaused, event: nil,
                                 level: .active, sound: false, actions: openAppAction(), session: state.sessions[sid]!,
                                 link: .session(id: sid))
        push(n, sentAt: nil, now: now, into: &effects)
    }

    mutating func handleSettings(_ new: Settings, now: Millis, into effects: inout [Effect]) {
        let old = state.settings
        state.settings = new
        if new.locale != old.locale { strings = Strings(locale: new.locale) }
        // EDGE-CASES Settings UI: turning Live Activities off ends the current one.
        if !new.enableLiveActivities, state.activity != nil {
            endActivity(now: now, into: &effects)
        } else if new.enableLiveActivities && !old.enableLiveActivities, let sid = mostRecentActiveSession() {
            startActivity(sid, now: now, into: &effects)
        } else if let a = state.activity {
            // Locale or privacy changed what the activity shows.
            refreshActivity(a.sessionId, now: now, force: true, into: &effects)
        }
        lowPowerCheck(now: now, into: &effects)
    }
}
