import Foundation

/// What a schedule does with the slots that passed while no worker was running (the store closed, every
/// process down), and with a slot noticed late.
public enum DurableCatchUp: Sendable, Equatable {
    /// Slots not fired within ``skipGrace`` of their time never fire: after downtime, the schedule goes on
    /// from its next slot.
    case skip
    /// Of the slots that passed, only the latest fires.
    case latest
    /// Every slot that passed fires (its run's id names its slot), the latest `max` of them at most.
    case all(max: Int)

    /// How late a slot may be noticed and still fire under ``skip``.
    public static let skipGrace: Duration = .seconds(1)

    var recorded: (kind: String, max: Int) {
        switch self {
        case .skip: return ("skip", 0)
        case .latest: return ("latest", 0)
        case .all(let max): return ("all", max)
        }
    }

    init(recorded kind: String, max: Int) {
        switch kind {
        case "skip": self = .skip
        case "all": self = .all(max: max)
        default: self = .latest
        }
    }
}

/// A schedule as the store recorded it (``DurableStore/schedules()``).
public struct DurableSchedule: Sendable, Equatable {
    /// The schedule's id (its runs are `"<id>@<slot, ISO 8601 UTC>"`).
    public let id: String
    /// The workflow each slot starts a run of.
    public let workflow: String
    /// The cron expression, for a schedule made with one.
    public let cron: String?
    /// The time zone its cron expression is read in.
    public let timeZone: TimeZone?
    /// The interval, for a schedule made with `every:`.
    public let interval: Duration?
    public let catchUp: DurableCatchUp
    /// Its next slot not fired yet (nil: none to come).
    public let next: Date?
    /// The last slot it fired, if any.
    public let last: Date?
}

/// When a schedule's slots are: a cron expression's, or every multiple of an interval since 1970 (UTC),
/// so that every process computes the same slots.
enum ScheduleRule: Sendable, Equatable {
    case cron(DurableCron)
    case every(TimeInterval)

    func next(after date: Date) -> Date? {
        switch self {
        case .cron(let cron): return cron.next(after: date)
        case .every(let interval):
            let slot = ((date.timeIntervalSince1970 / interval).rounded(.down) + 1) * interval
            return Date(timeIntervalSince1970: slot)
        }
    }

    /// The slots that fire when `now` is reached with `next` the first slot not fired yet (as `catchUp`
    /// says), and the schedule's next slot after them: a value computation, the same in every process.
    func firing(next: Date, now: Date, catchUp: DurableCatchUp) -> (fire: [Date], next: Date?) {
        guard next <= now else { return ([], next) }
        var due: [Date] = []
        var cursor: Date? = next
        let keep: Int
        switch catchUp {
        case .skip, .latest: keep = 1
        case .all(let max): keep = Swift.max(1, max)
        }
        // Enumerated up to `now` (keeping the latest `keep`), bounded: a schedule of every second down
        // for a year skips its enumeration past a million slots.
        var counted = 0
        while let slot = cursor, slot <= now, counted < 1_000_000 {
            due.append(slot)
            if due.count > keep { due.removeFirst(due.count - keep) }
            cursor = self.next(after: slot)
            counted += 1
        }
        let after = counted >= 1_000_000 ? self.next(after: now) : cursor
        if case .skip = catchUp {
            due = due.filter { now.timeIntervalSince($0) <= DurableCatchUp.skipGrace.inSeconds }
        }
        return (due, after)
    }

    /// The id of the run of `schedule`'s slot `slot`: `"<schedule>@<slot, ISO 8601 UTC>"` (fractions of
    /// a second only when the slot has one).
    static func runID(schedule: String, slot: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        let whole = slot.timeIntervalSince1970.rounded() == slot.timeIntervalSince1970
        formatter.formatOptions = whole ? [.withInternetDateTime] : [.withInternetDateTime, .withFractionalSeconds]
        return "\(schedule)@\(formatter.string(from: slot))"
    }
}
