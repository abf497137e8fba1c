/// Exponential backoff, the one every retry loop of the package uses: the wait after the n-th
/// failure is drawn under a ceiling of `first * 2^(n-1)`, capped at `maximum`, with the jitter the
/// caller needs.
package struct Backoff: Sendable, Hashable {
    /// How a wait is drawn under its ceiling.
    package enum Jitter: Sendable, Hashable {
        /// Uniform in `[0, ceiling]`: spreads the retries of a burst that failed together (a 503
        /// storm) instead of bringing them back in lockstep. The worker's notification retries.
        case full
        /// Half the ceiling plus a uniform part of the other half: two attempts are never closer
        /// than half a step. The APNs pool's reconnects.
        case equal
        /// The ceiling itself. The result publisher's retries of one record, whose ceiling grows
        /// slowly enough alone.
        case none
    }

    package var first: Duration
    package var maximum: Duration
    package var jitter: Jitter

    package init(first: Duration, maximum: Duration, jitter: Jitter) {
        self.first = first
        self.maximum = maximum
        self.jitter = jitter
    }

    /// The ceiling of the wait after `failures` failures (1-based; 0 or less gives 0).
    package func ceiling(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        let doublings = min(failures - 1, 30)
        return min(first * (1 << doublings), maximum)
    }

    /// The wait after `failures` failures; `draw(n)` is a uniform value in `0...n`.
    package func wait(afterFailures failures: Int, draw: (Int64) -> Int64) -> Duration {
        let ceiling = Self.nanoseconds(ceiling(afterFailures: failures))
        guard ceiling > 0 else { return .zero }
        switch jitter {
        case .full: return .nanoseconds(draw(ceiling))
        case .equal: return .nanoseconds(ceiling / 2 + draw(ceiling - ceiling / 2))
        case .none: return .nanoseconds(ceiling)
        }
    }

    /// The wait with the generator given.
    package func wait(afterFailures failures: Int, using random: inout some RandomNumberGenerator) -> Duration {
        wait(afterFailures: failures) { Int64.random(in: 0...$0, using: &random) }
    }

    /// The wait with the system's generator. Not `wait(using: &SystemRandomNumberGenerator())`:
    /// ThreadSanitizer crashes on an `inout` access to that zero-sized value (its address is not a
    /// real one), so the instrumented code never takes one.
    package func wait(afterFailures failures: Int) -> Duration {
        wait(afterFailures: failures) { Int64.random(in: 0...$0) }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
