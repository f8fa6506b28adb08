import Dispatch

// The one conversion of a `Duration` for timers and reports: every timer of the package (the
// schedulers, `TimeoutObserver`, `retry`'s delays) and every figure a report prints go through it.
extension Duration {
    /// Whole nanoseconds, saturating: a duration beyond what an `Int64` of nanoseconds holds (about 292
    /// years) gives `Int64.max` (or `.min` when negative); never traps.
    package var saturatingNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, carry) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        if carry { return seconds < 0 ? .min : .max }
        return sum
    }

    /// A timer's wait: 0 for a duration that is not positive, saturating above (see
    /// ``saturatingNanoseconds``).
    package var dispatchInterval: DispatchTimeInterval {
        .nanoseconds(Int(clamping: Swift.max(0, saturatingNanoseconds)))
    }

    /// The duration in seconds, as a `Double` (for arithmetic on delays and for reports).
    package var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// `seconds` as a duration: 0 for a value that is not positive (or not a number), capped at what a
    /// `Duration` holds.
    package init(clampingSeconds seconds: Double) {
        guard seconds > 0 else {
            self = .zero
            return
        }
        let whole = seconds.rounded(.down)
        guard whole < 9.2e18 else {
            self = Duration(secondsComponent: .max, attosecondsComponent: 0)
            return
        }
        self = Duration(secondsComponent: Int64(whole), attosecondsComponent: Int64((seconds - whole) * 1e18))
    }
}
