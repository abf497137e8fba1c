import Foundation
import NIOConcurrencyHelpers

/// Wall-clock time as the simulator sees it: JWT `iat` ages and the token-update window are measured
/// with it, so tests can move time instead of sleeping an hour.
public protocol SimulatorClock: Sendable {
    /// Seconds since 1970-01-01 UTC.
    func now() -> Double
}

/// The system clock.
public struct SystemSimulatorClock: SimulatorClock {
    public init() {}
    public func now() -> Double { Date().timeIntervalSince1970 }
}

/// A clock that moves only when told to; for tests.
public final class ManualSimulatorClock: SimulatorClock {
    // Sendable through the lock: every read and write of `seconds` goes through it.
    private let seconds: NIOLockedValueBox<Double>

    public init(_ start: Double = Date().timeIntervalSince1970) {
        self.seconds = NIOLockedValueBox(start)
    }

    public func now() -> Double { seconds.withLockedValue { $0 } }

    /// Moves the clock forward by `interval` seconds.
    public func advance(by interval: Double) {
        seconds.withLockedValue { $0 += interval }
    }
}
