import Foundation

/// A cron expression in a time zone: the slots of a schedule
/// (``DurableStore/schedule(_:id:cron:timeZone:input:catchUp:)``), and `next(after:)` for an app to show
/// "next at ...".
///
/// ```swift
/// let nightly = try DurableCron("0 3 * * *", timeZone: TimeZone(identifier: "Europe/Paris")!)
/// nightly.next(after: Date())   // the next 03:00 in Paris
/// ```
///
/// **Syntax.** Five fields: minute (0-59), hour (0-23), day of the month (1-31), month (1-12 or `jan`-`dec`),
/// day of the week (0-7, 0 and 7 are Sunday, or `sun`-`sat`). Each field is `*`, a value, a range
/// `a-b`, a step `*/n`, `a-b/n` or `a/n` (from `a` to the field's end), or a list of those (`1,15,30-40`).
/// Names are case-insensitive. `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly`, `@yearly`
/// (`@annually`) stand for `0 * * * *`, `0 0 * * *`, `0 0 * * 0`, `0 0 1 * *`, `0 0 1 1 *`.
///
/// **Rules.** Vixie cron's: when the day of the month and the day of the week are both restricted
/// (neither begins with `*`), a day matching either is a slot's day; otherwise the restricted one
/// decides, and a field beginning with `*` counts as not restricted (`0 0 */2 * 1`: Mondays that are odd
/// days, as in Vixie cron; Python's croniter takes odd days or Mondays). Times are the zone's wall
/// clock: a slot in an hour skipped by a change to summer time fires at the first instant after the gap
/// (02:30 on the morning Paris goes from 02:00 to 03:00 fires at 03:00); a slot in an hour repeated by the
/// change back fires once, at its first occurrence.
///
/// A value type without state: `next(after:)` may be called from any thread.
public struct DurableCron: Sendable, Equatable, CustomStringConvertible {
    /// The expression as given.
    public let expression: String
    /// The zone whose wall clock the fields are read in.
    public let timeZone: TimeZone

    let minutes: [Int]
    let hours: [Int]
    let days: Set<Int>
    let months: Set<Int>
    let weekdays: Set<Int>
    let daysRestricted: Bool
    let weekdaysRestricted: Bool

    /// Parses `expression`. Throws ``DurableError/invalidSchedule(_:)`` naming the field at fault and why.
    public init(_ expression: String, timeZone: TimeZone = .current) throws {
        self.expression = expression
        self.timeZone = timeZone
        let text = expression.trimmingCharacters(in: .whitespaces).lowercased()
        let macros = [
            "@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
            "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *",
        ]
        let expanded: String
        if text.hasPrefix("@") {
            guard let macro = macros[text] else {
                throw DurableError.invalidSchedule(
                    "cron '\(expression)': unknown '\(text)'; use @hourly, @daily, @weekly, @monthly or @yearly")
            }
            expanded = macro
        } else {
            expanded = text
        }
        let fields = expanded.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard fields.count == 5 else {
            throw DurableError.invalidSchedule(
                "cron '\(expression)' has \(fields.count) fields; give 5: minute hour day-of-month month day-of-week")
        }
        let monthNames = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        let dayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
        func parse(_ index: Int, _ name: String, _ range: ClosedRange<Int>, names: [String] = []) throws -> Set<Int> {
            try Self.field(fields[index], name: name, range: range, names: names, expression: expression)
        }
        minutes = try parse(0, "minute", 0...59).sorted()
        hours = try parse(1, "hour", 0...23).sorted()
        days = try parse(2, "day-of-month", 1...31)
        months = try parse(3, "month", 1...12, names: monthNames)
        // 7 is Sunday too.
        weekdays = Set(try parse(4, "day-of-week", 0...7, names: dayNames).map { $0 % 7 })
        daysRestricted = !fields[2].hasPrefix("*")
        weekdaysRestricted = !fields[4].hasPrefix("*")
    }

    public var description: String { "\(expression) (\(timeZone.identifier))" }

    public static func == (lhs: DurableCron, rhs: DurableCron) -> Bool {
        lhs.expression == rhs.expression && lhs.timeZone.identifier == rhs.timeZone.identifier
    }

    /// The first slot strictly after `date`, or nil when none comes within 8 years (`0 0 30 2 *`: never).
    public func next(after date: Date) -> Date? {
        let after = date.timeIntervalSince1970
        // The wall clock of `date`, floored to its minute, then the minute after it.
        let local = after + Double(timeZone.secondsFromGMT(for: date))
        let localMinutes = Int((local / 60).rounded(.down)) + 1
        var day = Self.floorDiv(localMinutes, 1_440)
        let startMinute = localMinutes - day * 1_440
        let lastDay = day + 8 * 366
        var first = true
        while day <= lastDay {
            defer {
                day += 1
                first = false
            }
            let (_, month, dayOfMonth) = Self.civil(fromDays: day)
            guard months.contains(month), matches(day: dayOfMonth, weekday: Self.weekday(fromDays: day)) else {
                continue
            }
            for hour in hours {
                if first && hour < startMinute / 60 { continue }
                for minute in minutes {
                    if first && hour * 60 + minute < startMinute { continue }
                    let wall = Double(day * 86_400 + hour * 3_600 + minute * 60)
                    let instant = self.instant(ofWall: wall)
                    if instant > after { return Date(timeIntervalSince1970: instant) }
                }
            }
        }
        return nil
    }

    /// The slots after `date`, in order, up to `limit` (or up to `until`).
    public func slots(after date: Date, until end: Date = .distantFuture, limit: Int = 100) -> [Date] {
        var found: [Date] = []
        var cursor = date
        while found.count < limit, let next = next(after: cursor), next <= end {
            found.append(next)
            cursor = next
        }
        return found
    }

    private func matches(day: Int, weekday: Int) -> Bool {
        // Vixie cron: either when both are restricted, both otherwise (a `*` field holds every day; a
        // `*/2` field, not restricting, still holds only its days).
        if daysRestricted && weekdaysRestricted { return days.contains(day) || weekdays.contains(weekday) }
        return days.contains(day) && weekdays.contains(weekday)
    }

    /// The instant a wall-clock time (seconds since 1970 as if the zone were UTC) happens: its first
    /// occurrence in a repeated hour; the first instant after the gap for a time skipped.
    func instant(ofWall wall: Double) -> Double {
        let before = Double(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: wall - 43_200)))
        let after = Double(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: wall + 43_200)))
        let candidates = Set([wall - before, wall - after]).sorted().filter { candidate in
            Double(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: candidate))) + candidate == wall
        }
        if let first = candidates.first { return first }
        // Skipped: the change itself (the first instant of the wall clock after the gap).
        let change = timeZone.nextDaylightSavingTimeTransition(
            after: Date(timeIntervalSince1970: wall - max(before, after) - 1))
        return change?.timeIntervalSince1970 ?? (wall - before)
    }

    private static func field(
        _ text: String, name: String, range: ClosedRange<Int>, names: [String], expression: String
    ) throws -> Set<Int> {
        func fail(_ why: String) -> DurableError {
            .invalidSchedule("cron '\(expression)', \(name) field '\(text)': \(why)")
        }
        func value(_ token: Substring) throws -> Int {
            if let number = Int(token) {
                guard range.contains(number) else {
                    throw fail("\(number) is outside \(range.lowerBound)-\(range.upperBound)")
                }
                return number
            }
            if let index = names.firstIndex(of: String(token)) { return index + range.lowerBound }
            throw fail(
                "'\(token)' is not a number\(names.isEmpty ? "" : " or a name (\(names.joined(separator: ", ")))")")
        }
        var values = Set<Int>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard !item.isEmpty else { throw fail("an empty item in its list") }
            let parts = item.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw fail("more than one '/' in '\(item)'") }
            var step = 1
            if parts.count == 2 {
                guard let number = Int(parts[1]), number > 0 else {
                    throw fail("the step '\(parts[1])' is not a number above 0")
                }
                step = number
            }
            let span = parts[0]
            var low: Int
            var high: Int
            if span == "*" {
                (low, high) = (range.lowerBound, range.upperBound)
            } else if let dash = span.firstIndex(of: "-") {
                low = try value(span[..<dash])
                high = try value(span[span.index(after: dash)...])
                guard low <= high else { throw fail("the range \(span) goes backwards") }
            } else {
                low = try value(span)
                // `a/n`: from `a` to the field's end.
                high = parts.count == 2 ? range.upperBound : low
            }
            values.formUnion(stride(from: low, through: high, by: step))
        }
        return values
    }

    private static func floorDiv(_ a: Int, _ b: Int) -> Int { a >= 0 ? a / b : -((-a + b - 1) / b) }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
    static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shifted = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shifted + 2) / 5 + 1
        let month = shifted < 10 ? shifted + 3 : shifted - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// 0 for Sunday ... 6 for Saturday (1970-01-01 was a Thursday).
    static func weekday(fromDays days: Int) -> Int { ((days % 7) + 11) % 7 }
}
