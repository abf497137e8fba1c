import Threading
import Foundation

/// Says whether a message about `key` is due: at most once per `interval` for each key.
package final class RateLimitedLog: Sendable {
    let interval: Duration
    private let last = Locked<[String: ContinuousClock.Instant]>([:])

    package init(interval: Duration) {
        self.interval = interval
    }

    package func shouldLog(_ key: String, now: ContinuousClock.Instant) -> Bool {
        last.withLock { last in
            if let previous = last[key], now - previous < interval { return false }
            last[key] = now
            return true
        }
    }
}
