import NIOCore

extension APNsConnectionPool.StateMachine {
    /// When a slot connects again: after a failure, `backoff` (equal jitter: two attempts are
    /// never closer than half a step); after a healthy connection, at once.
    struct Reconnect: Sendable {
        var backoff: Backoff
        /// A connection that stayed up this long resets the slot's failure count.
        var healthyAfter: TimeAmount

        init(base: TimeAmount, maximum: TimeAmount, healthyAfter: TimeAmount) {
            self.backoff = Backoff(
                first: .nanoseconds(base.nanoseconds), maximum: .nanoseconds(maximum.nanoseconds), jitter: .equal)
            self.healthyAfter = healthyAfter
        }

        var base: TimeAmount { TimeAmount(backoff.first) }

        /// The wait before a slot connects again after `failures` failures in a row (equal jitter).
        func delay(failures: Int) -> TimeAmount {
            TimeAmount(backoff.wait(afterFailures: failures))
        }
    }
}
