import APNs

/// When to try a notification again after APNs said "later" (429, 500, 503, a lost connection, a
/// timeout), and when to give up.
///
/// Exponential backoff with full jitter (`Backoff`): the wait before attempt n+1 is uniform in
/// `[0, min(maxBackoff, initialBackoff * 2^(n-1))]`. Full jitter spreads the retries of a burst that
/// failed together (a 503 storm) instead of bringing them back in lockstep.
package struct RetryPolicy: Sendable, Hashable {
    /// Requests sent for one event at most, the first included.
    package var maxAttempts: Int = 8
    package var initialBackoff: Duration = .milliseconds(200)
    package var maxBackoff: Duration = .seconds(30)
    /// How long after its first attempt an event may still be retried.
    package var maxRetryDuration: Duration = .seconds(600)

    package init() {}

    /// Why retrying stops.
    package enum Decision: Sendable, Hashable {
        case retry(after: Duration)
        /// `maxAttempts` or `maxRetryDuration` reached: the event fails and is dead-lettered.
        case exhausted
        /// The notification's `apns-expiration` passes before the next attempt could be made:
        /// APNs would drop it anyway.
        case expired
    }

    /// The waits between attempts: `initialBackoff` doubling up to `maxBackoff`, full jitter.
    package var backoff: Backoff { Backoff(first: initialBackoff, maximum: maxBackoff, jitter: .full) }

    /// The upper bound of the wait after `attempt` attempts (1-based), before jitter.
    package func backoffCeiling(afterAttempt attempt: Int) -> Duration {
        backoff.ceiling(afterFailures: max(attempt, 1))
    }

    /// Decides what to do after `attempts` attempts (the last one answered "later").
    ///
    /// - Parameters:
    ///   - elapsed: time since the first attempt.
    ///   - expiration: the notification's `apns-expiration`, if any.
    ///   - now: UNIX time in seconds, to compare with the expiration.
    package func decide(
        attempts: Int, elapsed: Duration, expiration: APNsExpiration?, now: Int64,
        using random: inout some RandomNumberGenerator
    ) -> Decision {
        decide(attempts: attempts, elapsed: elapsed, expiration: expiration, now: now) {
            Int64.random(in: 0...$0, using: &random)
        }
    }

    /// `draw(n)`: a uniform value in `0...n` (the worker's answer decisions pass the system's through
    /// a closure: `AnswerDecision`).
    func decide(
        attempts: Int, elapsed: Duration, expiration: APNsExpiration?, now: Int64, draw: (Int64) -> Int64
    ) -> Decision {
        guard attempts < maxAttempts else { return .exhausted }
        let wait = backoff.wait(afterFailures: max(attempts, 1), draw: draw)
        guard elapsed + wait <= maxRetryDuration else { return .exhausted }
        // Rounded up to the next second: APNs's expiration has one-second resolution.
        if let expiration, expiration.hasPassed(now: now + wait.components.seconds + 1) {
            return .expired
        }
        return .retry(after: wait)
    }
}
