import Foundation
import Testing

extension Tag {
    /// Stress and fuzz tests: a short version runs with `swift test`; `AWESOMECOMMAND_STRESS=long`
    /// runs the long one (`AWESOMECOMMAND_STRESS=long swift test --filter Stress`).
    @Tag public static var stress: Self
}

/// How much work the stress and fuzz tests do.
public enum StressScale {
    public static let isLong = ProcessInfo.processInfo.environment["AWESOMECOMMAND_STRESS"] == "long"
    /// `AWESOMECOMMAND_STRESS=sanitizer` (set by `.ci/run` for the ThreadSanitizer and AddressSanitizer
    /// runs, where every operation is about ten times slower): the few tests that flood the engine's
    /// Dispatch pool for seconds take their `sanitized` size, so they do not starve every other suite's
    /// waits (the Swift concurrency pool shares that Dispatch pool on Linux).
    public static let isSanitized = ProcessInfo.processInfo.environment["AWESOMECOMMAND_STRESS"] == "sanitizer"
    public static func pick(short: Int, long: Int) -> Int { isLong ? long : short }
    public static func pick(short: Int, long: Int, sanitized: Int) -> Int {
        isSanitized ? sanitized : pick(short: short, long: long)
    }
}

/// A small, seedable random number generator (SplitMix64), so a failing case can be replayed.
public struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
