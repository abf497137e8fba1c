import Threading
import Foundation

/// Says whether a message about `key` is due: at most once per `interval` for each key.
final class RateLimitedLog: Sendable {
    let interval: Duration
    private let last = Locked<[String: ContinuousClock.Instant]>([:])

    init(interval: Duration) {
        self.interval = interval
    }

    func shouldLog(_ key: String, now: ContinuousClock.Instant) -> Bool {
        last.withLock { last in
            if let previous = last[key], now - previous < interval { return false }
            last[key] = now
            return true
        }
    }
}
