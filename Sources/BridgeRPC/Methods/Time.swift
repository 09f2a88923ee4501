import BridgeCore
import BridgeEngine

extension MethodTable {
    /// Elapsed-time text and the test clock.
    func registerTime(_ env: ServerEnvironment) {
        // The words of each table (English for what it lacks), built once;
        // keyed by table, not by the client's locale string, so it stays small.
        var formatters: [String: ElapsedFormatter] = [:]
        func formatter(_ locale: String) -> ElapsedFormatter {
            let name = Localization.tableName(for: locale)
            if let f = formatters[name] { return f }
            let f = ElapsedFormatter(words: .init(table: Localization.tables[name]!))
            formatters[name] = f
            return f
        }

        // {seconds, style?, locale?} -> {text}. Any JSON number is accepted:
        // fractions floor, negatives read as 0, huge values clamp (see
        // ElapsedFormatter). Words come from the localization table of
        // `locale`, by default the settings' locale.
        on("elapsed.format") { p, _ in
            let seconds: Double = try p.required("seconds")
            let style = try p.oneOf("style", ElapsedFormatter.Style.allCases.map(\.rawValue), default: "positional")
            let locale = try p.optional("locale", as: String.self) ?? env.engine.engine.settings.locale
            return ["text": .string(formatter(locale).string(seconds: seconds, style: ElapsedFormatter.Style(rawValue: style)!))]
        }

        // {ms} -> {now, fired}: only with `serve --manual-clock`, where time
        // moves only through this call. Fires every timeout due, in order,
        // before answering, so the caller sees their effects already queued.
        on("debug.advanceClock") { p, _ in
            // The contract bounds ms to 0...366 days (ParamContract runs
            // first): periodic timeouts fire once per period crossed, so an
            // unbounded step would hold the loop as long (an hourly sweep
            // over 2^63 ms).
            let ms: Int64 = try p.required("ms")
            guard env.scheduler.clock == .manual else {
                throw RPCError.application(
                    -32040, "Manual clock not enabled",
                    data: ["reason": "debug.advanceClock needs the server started with `serve --manual-clock`",
                           "clock": "system"])
            }
            let fired = try env.scheduler.advance(byMs: UInt64(ms))
            return ["now": .int(Int64(clamping: env.scheduler.nowMs)), "fired": .int(Int64(fired)),
                    "wallClockMs": .int(env.scheduler.wallClockMs)]
        }
    }
}
