import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

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

extension APNsConnectionPool {
    /// A failed connect in plain words: the address and the system's reason for each attempt
    /// (`Connection refused`), or why the name did not resolve; not NIO's type names.
    static func describeConnectFailure(_ error: any Error, host: String, port: Int) -> String {
        func plain(_ error: any Error) -> String {
            if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
            if case ChannelError.connectTimeout(let timeout) = error {
                return "no answer within \(timeout.nanoseconds / 1_000_000) ms"
            }
            return "\(error)"
        }
        guard let connection = error as? NIOConnectionError else {
            return "cannot connect to \(host):\(port): \(plain(error))"
        }
        let attempts = connection.connectionErrors.map {
            "\($0.target.ipAddress ?? "\($0.target)"): \(plain($0.error))"
        }
        if attempts.isEmpty, let dns = connection.dnsAError ?? connection.dnsAAAAError {
            return "cannot resolve \(host): \(plain(dns))"
        }
        return "cannot connect to \(host):\(port)" + (attempts.isEmpty ? "" : " (\(attempts.joined(separator: "; ")))")
    }
}
