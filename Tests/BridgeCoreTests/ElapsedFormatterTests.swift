import Testing
@testable import BridgeCore

@Suite("Elapsed formatting")
struct ElapsedFormatterTests {
    let f = ElapsedFormatter.english

    // seconds, positional, short, spoken
    static let table: [(Double, String, String, String)] = [
        (0, "0:00", "0s", "0 seconds"),
        (0.999, "0:00", "0s", "0 seconds"),
        (1, "0:01", "1s", "1 second"),
        (5, "0:05", "5s", "5 seconds"),
        (59.999, "0:59", "59s", "59 seconds"),
        (60, "1:00", "1m", "1 minute"),
        (61, "1:01", "1m 1s", "1 minute, 1 second"),
        (165, "2:45", "2m 45s", "2 minutes, 45 seconds"),
        (599, "9:59", "9m 59s", "9 minutes, 59 seconds"),
        (600, "10:00", "10m", "10 minutes"),
        (3599, "59:59", "59m 59s", "59 minutes, 59 seconds"),
        (3599.999, "59:59", "59m 59s", "59 minutes, 59 seconds"),
        (3600, "1:00:00", "1h", "1 hour"),
        (3601, "1:00:01", "1h", "1 hour, 1 second"),
        (3780, "1:03:00", "1h 3m", "1 hour, 3 minutes"),
        (3787, "1:03:07", "1h 3m", "1 hour, 3 minutes, 7 seconds"),
        (7200, "2:00:00", "2h", "2 hours"),
        (86399, "23:59:59", "23h 59m", "23 hours, 59 minutes, 59 seconds"),
        (86400, "24:00:00", "1d", "1 day"),
        (90187, "25:03:07", "1d 1h", "1 day, 1 hour, 3 minutes, 7 seconds"),
        (172800 + 60, "48:01:00", "2d", "2 days, 1 minute"),
        (-0.0, "0:00", "0s", "0 seconds"),
        (-0.5, "0:00", "0s", "0 seconds"),
        (-3600, "0:00", "0s", "0 seconds"),
        (-.infinity, "0:00", "0s", "0 seconds"),
        (.nan, "--:--", "--", "unknown duration"),
        (.leastNonzeroMagnitude, "0:00", "0s", "0 seconds"),
        (.infinity, "277777777777:46:39", "11574074074d 1h", "11574074074 days, 1 hour, 46 minutes, 39 seconds"),
        (1e300, "277777777777:46:39", "11574074074d 1h", "11574074074 days, 1 hour, 46 minutes, 39 seconds"),
        (.greatestFiniteMagnitude, "277777777777:46:39", "11574074074d 1h",
         "11574074074 days, 1 hour, 46 minutes, 39 seconds"),
        (ElapsedFormatter.maxSeconds - 1, "277777777777:46:38", "11574074074d 1h",
         "11574074074 days, 1 hour, 46 minutes, 38 seconds"),
    ]

    @Test("boundaries, every style", arguments: table)
    func boundaries(_ row: (Double, String, String, String)) {
        #expect(f.string(seconds: row.0, style: .positional) == row.1)
        #expect(f.string(seconds: row.0, style: .short) == row.2)
        #expect(f.string(seconds: row.0, style: .spoken) == row.3)
    }

    @Test("milliseconds floor, including negative and extremes")
    func milliseconds() {
        #expect(f.string(milliseconds: 59_999) == "0:59")
        #expect(f.string(milliseconds: 60_000) == "1:00")
        #expect(f.string(milliseconds: -1) == "0:00")
        #expect(f.string(milliseconds: .min) == "0:00")
        #expect(f.string(milliseconds: .max) == "277777777777:46:39")
        #expect(f.string(milliseconds: 9_999_999_999_999_999) == "2777777777:46:39")
    }

    @Test("localized words, templates and a table with fallback")
    func localized() {
        let german = ElapsedFormatter(words: .init(
            day: .init(singular: "Tag", plural: "Tage", abbreviation: " T"),
            hour: .init(singular: "Stunde", plural: "Stunden", abbreviation: " Std."),
            minute: .init(singular: "Minute", plural: "Minuten", abbreviation: " Min."),
            second: .init(singular: "Sekunde", plural: "Sekunden", abbreviation: " Sek."),
            separator: " und ", unknown: "unbekannte Dauer"))
        #expect(german.string(seconds: 165, style: .spoken) == "2 Minuten und 45 Sekunden")
        #expect(german.string(seconds: 3660, style: .spoken) == "1 Stunde und 1 Minute")
        #expect(german.string(seconds: 165, style: .short) == "2 Min. 45 Sek.")
        #expect(german.string(seconds: .nan, style: .spoken) == "unbekannte Dauer")
        #expect(german.string(seconds: 165, style: .positional) == "2:45")

        let ja = ElapsedFormatter(words: .init(table: [
            "elapsed.hour.one": "#時間", "elapsed.hour.other": "#時間",
            "elapsed.minute.one": "#分", "elapsed.minute.other": "#分",
            "elapsed.second.one": "#秒", "elapsed.second.other": "#秒",
            "elapsed.separator": "",
        ]))
        #expect(ja.string(seconds: 3787, style: .spoken) == "1時間3分7秒")
        // Missing keys fall back to English.
        #expect(ja.string(seconds: 86400, style: .spoken) == "1 day")
        #expect(ja.string(seconds: 165, style: .short) == "2m 45s")
        #expect(ElapsedFormatter.Words(table: ElapsedFormatter.Words.englishTable) == .english)
        #expect(ElapsedFormatter.Words.englishTable["elapsed.minute.other"] == "minutes")
    }

    @Test("long words outgrow the first buffer without truncation")
    func longWords() {
        let long = String(repeating: "x", count: 200)
        let w = ElapsedFormatter(words: .init(
            day: .init(singular: long, plural: long, abbreviation: long),
            hour: .init(singular: long, plural: long, abbreviation: long),
            minute: .init(singular: long, plural: long, abbreviation: long),
            second: .init(singular: long, plural: long, abbreviation: long),
            unknown: long))
        let s = w.string(seconds: 90187, style: .spoken)
        #expect(s.utf8.count == 4 * 200 + 4 * 2 + 3 * 2) // 4 words, "n " each, 3 separators
        #expect(s.hasPrefix("1 xxx") && s.hasSuffix("7 " + long))
    }

    @Test("every style is defined for random doubles")
    func randomInputs() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<5000 {
            let d = Double(bitPattern: rng.next())
            for style in ElapsedFormatter.Style.allCases {
                #expect(!f.string(seconds: d, style: style).isEmpty)
            }
        }
    }
}
