import CBridge

/// Elapsed time as text: "2:45" (lock screen), "2m 45s" (compact label),
/// "2 minutes, 45 seconds" (VoiceOver). The work happens in C
/// (`cb_elapsed_format`); this type owns the localized words.
///
/// Every `Double` gives a string: fractions are floored (59.999 -> "0:59"),
/// negatives and -inf read as 0, NaN gives "--:--" / "--" / `words.unknown`,
/// values above `maxSeconds` (and +inf) are clamped to it.
public struct ElapsedFormatter: Sendable {
    public enum Style: String, CaseIterable, Sendable {
        /// [h:]m:ss, hours not rolled into days: 0:05, 59:59, 1:00:00, 25:03:07.
        case positional
        /// The largest non-zero unit and the next: 45s, 2m 45s, 1h 3m, 1d 2h.
        case short
        /// Every non-zero unit, for accessibility: 1 hour, 3 minutes, 7 seconds.
        case spoken
    }

    /// How one unit reads. A word containing `#` is a template where the
    /// number goes ("#分", "# Minuten"); otherwise spoken text is
    /// "<n> <word>" and short text "<n><abbreviation>".
    public struct UnitWords: Sendable, Equatable {
        public var singular: String
        public var plural: String
        public var abbreviation: String
        public init(singular: String, plural: String, abbreviation: String) {
            self.singular = singular
            self.plural = plural
            self.abbreviation = abbreviation
        }
    }

    /// The unit words of one language. Singular is used for exactly 1.
    public struct Words: Sendable, Equatable {
        public var day, hour, minute, second: UnitWords
        /// Between spoken parts (", ").
        public var separator: String
        /// Between short parts (" ").
        public var shortSeparator: String
        /// Spoken text for an unknown duration (NaN).
        public var unknown: String

        public init(day: UnitWords, hour: UnitWords, minute: UnitWords, second: UnitWords,
                    separator: String = ", ", shortSeparator: String = " ", unknown: String) {
            self.day = day
            self.hour = hour
            self.minute = minute
            self.second = second
            self.separator = separator
            self.shortSeparator = shortSeparator
            self.unknown = unknown
        }

        public static let english = Words(
            day: .init(singular: "day", plural: "days", abbreviation: "d"),
            hour: .init(singular: "hour", plural: "hours", abbreviation: "h"),
            minute: .init(singular: "minute", plural: "minutes", abbreviation: "m"),
            second: .init(singular: "second", plural: "seconds", abbreviation: "s"),
            unknown: "unknown duration")

        /// The localization-table keys these words are read from, with their
        /// English values (merge into a `Localizable.strings`-style table):
        /// `elapsed.<unit>.one|other|abbrev` for day/hour/minute/second,
        /// `elapsed.separator`, `elapsed.separator.short`, `elapsed.unknown`.
        public static var englishTable: [String: String] { english.table }

        public var table: [String: String] {
            var t: [String: String] = [
                "elapsed.separator": separator,
                "elapsed.separator.short": shortSeparator,
                "elapsed.unknown": unknown,
            ]
            for (name, u) in [("day", day), ("hour", hour), ("minute", minute), ("second", second)] {
                t["elapsed.\(name).one"] = u.singular
                t["elapsed.\(name).other"] = u.plural
                t["elapsed.\(name).abbrev"] = u.abbreviation
            }
            return t
        }

        /// Words from a localization table (keys as in `table`); any key the
        /// table lacks comes from `fallback`, so a partial locale still works.
        public init(table: [String: String], fallback: Words = .english) {
            func unit(_ name: String, _ fb: UnitWords) -> UnitWords {
                UnitWords(singular: table["elapsed.\(name).one"] ?? fb.singular,
                          plural: table["elapsed.\(name).other"] ?? fb.plural,
                          abbreviation: table["elapsed.\(name).abbrev"] ?? fb.abbreviation)
            }
            self.init(day: unit("day", fallback.day), hour: unit("hour", fallback.hour),
                      minute: unit("minute", fallback.minute), second: unit("second", fallback.second),
                      separator: table["elapsed.separator"] ?? fallback.separator,
                      shortSeparator: table["elapsed.separator.short"] ?? fallback.shortSeparator,
                      unknown: table["elapsed.unknown"] ?? fallback.unknown)
        }
    }

    /// The largest value formatted as itself (about 31.7 million years).
    public static let maxSeconds: Double = 999_999_999_999_999

    public let words: Words
    /// All words as NUL-terminated C strings in one buffer, laid out once so
    /// formatting needs no per-call conversions.
    private let storage: [CChar]
    private let offsets: [Int]

    public init(words: Words = .english) {
        self.words = words
        let strings = [words.day.singular, words.hour.singular, words.minute.singular, words.second.singular,
                       words.day.plural, words.hour.plural, words.minute.plural, words.second.plural,
                       words.day.abbreviation, words.hour.abbreviation, words.minute.abbreviation,
                       words.second.abbreviation, words.separator, words.shortSeparator, words.unknown]
        var storage: [CChar] = []
        var offsets: [Int] = []
        for s in strings {
            offsets.append(storage.count)
            // An embedded NUL would end the C string early; drop it instead.
            storage.append(contentsOf: s.utf8.filter { $0 != 0 }.map { CChar(bitPattern: $0) })
            storage.append(0)
        }
        self.storage = storage
        self.offsets = offsets
    }

    public static let english = ElapsedFormatter()

    public func string(seconds: Double, style: Style = .positional) -> String {
        let cStyle: cb_elapsed_style
        switch style {
        case .positional: cStyle = CB_ELAPSED_POSITIONAL
        case .short: cStyle = CB_ELAPSED_SHORT
        case .spoken: cStyle = CB_ELAPSED_SPOKEN
        }
        return storage.withUnsafeBufferPointer { st -> String in
            let p = { (i: Int) in st.baseAddress! + offsets[i] }
            var w = cb_elapsed_words()
            w.singular = (p(0), p(1), p(2), p(3))
            w.plural = (p(4), p(5), p(6), p(7))
            w.abbrev = (p(8), p(9), p(10), p(11))
            w.separator = p(12)
            w.short_separator = p(13)
            w.unknown = p(14)
            var cap = 64
            while true {
                var buf = [CChar](repeating: 0, count: cap)
                let n = cb_elapsed_format(seconds, cStyle, &w, &buf, cap)
                precondition(n >= 0, "cb_elapsed_format: \(String(cString: cb_strerror(n)))")
                if Int(n) < cap { return String(decoding: buf[..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
                cap = Int(n) + 1
            }
        }
    }

    /// Milliseconds, as the engine counts time.
    public func string(milliseconds: Int64, style: Style = .positional) -> String {
        // Integer floor division: Double(ms) / 1000 could round up across a
        // second boundary for huge values.
        let q = milliseconds / 1000 - (milliseconds % 1000 < 0 ? 1 : 0)
        return string(seconds: Double(q), style: style)
    }
}
