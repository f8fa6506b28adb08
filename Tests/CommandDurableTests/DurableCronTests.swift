import CommandDurable
import Foundation
import Testing

/// `DurableCron` against a table made by an independent implementation (Python's croniter:
/// `Fixtures/make-cron-table.py`, which says which rows it leaves out and why), and by hand where the
/// rules are this library's own (Vixie cron's day rule, summer time).
@Suite struct DurableCronTests {
    struct Row: Decodable {
        let expression: String
        let timeZone: String
        let after: Double
        let next: Double
    }

    static func date(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }
    static let paris = TimeZone(identifier: "Europe/Paris")!
    static let newYork = TimeZone(identifier: "America/New_York")!

    @Test func theNextSlot_agreesWithCroniter_onEveryRowOfItsTable() throws {
        let url = try #require(
            Bundle.module.url(forResource: "cron-table", withExtension: "json", subdirectory: "Fixtures"))
        let rows = try JSONDecoder().decode([Row].self, from: Data(contentsOf: url))
        #expect(rows.count >= 300)
        var wrong: [String] = []
        for row in rows {
            let cron = try DurableCron(row.expression, timeZone: try #require(TimeZone(identifier: row.timeZone)))
            let next = cron.next(after: Date(timeIntervalSince1970: row.after))?.timeIntervalSince1970
            if next != row.next {
                wrong.append(
                    "\(row.expression) in \(row.timeZone) after \(Int(row.after)): \(next.map { Int($0) } ?? -1), croniter \(Int(row.next))"
                )
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) of \(rows.count) differ: \(wrong.prefix(10))")
    }

    @Test func springForward_aSkippedSlot_firesAtTheFirstInstantAfterTheGap() throws {
        // Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
        let paris = try DurableCron("30 2 * * *", timeZone: Self.paris)
        #expect(paris.next(after: Self.date("2026-03-28T12:00:00Z")) == Self.date("2026-03-29T01:00:00Z"))
        #expect(paris.next(after: Self.date("2026-03-29T01:00:00Z")) == Self.date("2026-03-30T00:30:00Z"))
        // Every quarter of the skipped hour: one firing, at 03:00 CEST; the next at 04:00 CEST.
        let quarters = try DurableCron("*/15 2,4 * * *", timeZone: Self.paris)
        #expect(
            quarters.slots(after: Self.date("2026-03-29T00:00:00Z"), limit: 3) == [
                Self.date("2026-03-29T01:00:00Z"), Self.date("2026-03-29T02:00:00Z"), Self.date("2026-03-29T02:15:00Z"),
            ])
        // New York, 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC).
        let newYork = try DurableCron("15 2 8 3 *", timeZone: Self.newYork)
        #expect(newYork.next(after: Self.date("2026-03-01T00:00:00Z")) == Self.date("2026-03-08T07:00:00Z"))
        // A slot after the gap is where it always is.
        let three = try DurableCron("0 3 * * *", timeZone: Self.newYork)
        #expect(three.next(after: Self.date("2026-03-08T05:00:00Z")) == Self.date("2026-03-08T07:00:00Z"))
    }

    @Test func fallBack_aSlotOfTheRepeatedHour_firesOnce() throws {
        // Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30 happens at 00:30 and 01:30 UTC.
        let paris = try DurableCron("30 2 * * *", timeZone: Self.paris)
        #expect(
            paris.slots(after: Self.date("2026-10-24T12:00:00Z"), limit: 2) == [
                Self.date("2026-10-25T00:30:00Z"), Self.date("2026-10-26T01:30:00Z"),
            ])
        // Asked from inside the second 02:xx: the slot fired already, the next is tomorrow's.
        #expect(paris.next(after: Self.date("2026-10-25T01:10:00Z")) == Self.date("2026-10-26T01:30:00Z"))
        // Hourly through the change: 02:00 fires once (at its first occurrence), 03:00 CET an hour after
        // the second 02:00 began.
        let hourly = try DurableCron("0 * * * *", timeZone: Self.paris)
        #expect(
            hourly.slots(after: Self.date("2026-10-24T23:30:00Z"), limit: 3) == [
                Self.date("2026-10-25T00:00:00Z"),  // 02:00 CEST
                Self.date("2026-10-25T02:00:00Z"),  // 03:00 CET (01:00 UTC is 02:00 CET again: not fired)
                Self.date("2026-10-25T03:00:00Z"),  // 04:00 CET
            ])
        // New York, 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00 UTC); 01:30 at 05:30 and 06:30 UTC.
        let newYork = try DurableCron("30 1 * * *", timeZone: Self.newYork)
        #expect(
            newYork.slots(after: Self.date("2026-10-31T12:00:00Z"), limit: 2) == [
                Self.date("2026-11-01T05:30:00Z"), Self.date("2026-11-02T06:30:00Z"),
            ])
    }

    @Test func vixieDayRule_bothRestricted_matchEither_aStarStepDoesNotRestrict() throws {
        let utc = TimeZone(identifier: "UTC")!
        // The 13th or a Friday: 2026-02-06 is a Friday, before the 13th.
        let either = try DurableCron("0 0 13 * fri", timeZone: utc)
        #expect(either.next(after: Self.date("2026-02-01T00:00:00Z")) == Self.date("2026-02-06T00:00:00Z"))
        // `*/2` begins with `*`: not restricted, so both must hold: Mondays that are odd days (2026-01-05,
        // then 2026-01-19; the 12th is an even Monday).
        let stepped = try DurableCron("0 0 */2 * 1", timeZone: utc)
        #expect(
            stepped.slots(after: Self.date("2026-01-01T00:00:00Z"), limit: 2) == [
                Self.date("2026-01-05T00:00:00Z"), Self.date("2026-01-19T00:00:00Z"),
            ])
        // 7 and 0 are Sunday; names and macros.
        #expect(
            try DurableCron("0 0 * * 7", timeZone: utc).next(after: Self.date("2026-01-01T00:00:00Z"))
                == Self.date("2026-01-04T00:00:00Z"))
        #expect(
            try DurableCron("0 0 * * SUN", timeZone: utc).next(after: Self.date("2026-01-01T00:00:00Z"))
                == Self.date("2026-01-04T00:00:00Z"))
        #expect(
            try DurableCron("@monthly", timeZone: utc).next(after: Self.date("2026-01-01T00:00:00Z"))
                == Self.date("2026-02-01T00:00:00Z"))
        #expect(
            try DurableCron("5/20 * * * *", timeZone: utc).slots(after: Self.date("2026-01-01T00:00:00Z"), limit: 3)
                == [
                    Self.date("2026-01-01T00:05:00Z"), Self.date("2026-01-01T00:25:00Z"),
                    Self.date("2026-01-01T00:45:00Z"),
                ])
        // Never: February 30th.
        #expect(try DurableCron("0 0 30 2 *", timeZone: utc).next(after: Self.date("2026-01-01T00:00:00Z")) == nil)
    }

    @Test func aBadExpression_isRefused_namingItsField() {
        let cases: [(String, String)] = [
            ("* * * *", "4 fields"), ("60 * * * *", "minute"), ("* 24 * * *", "hour"), ("* * 0 * *", "day-of-month"),
            ("* * * 13 *", "month"), ("* * * * 8", "day-of-week"), ("* * * foo *", "month"), ("*/0 * * * *", "step"),
            ("5-2 * * * *", "backwards"), ("@sometimes", "@sometimes"), ("1,,2 * * * *", "empty"),
        ]
        for (expression, says) in cases {
            do {
                _ = try DurableCron(expression, timeZone: TimeZone(identifier: "UTC")!)
                Issue.record("'\(expression)' was accepted")
            } catch {
                #expect("\(error)".contains(says), "'\(expression)': \(error)")
            }
        }
    }
}
