/// When provider tokens are issued and when a connection changes its token: the same for every process
/// that signs with a key, from its clock alone, so that a fleet brings one new token per key into use
/// each period with no coordination service.
///
/// Apple's rules: a token is refused once it is an hour old (`ExpiredProviderToken`); a token must not
/// be replaced more often than every 20 minutes (`TooManyProviderTokenUpdates`), and APNs judges that
/// per connection, from when the connection first used its token; APNs does not tell apart the tokens of
/// several providers of one team, so every pod must send the same one. Hence:
///
/// - Tokens are issued at multiples of `period` (seconds since 1970, UTC): every process signs the same
///   `iat`, and with deterministic signatures (RFC 6979) the same bytes.
/// - A period's token comes into use `adoptionDelay` after its `iat`, so that a process whose clock
///   runs ahead by less never sends a token issued in APNs's future.
/// - A connection keeps the token it first used until that token is `switchAge` old, then takes the
///   token in use then.
///
/// With the default period of 30 minutes, the delay is 2 minutes and the switch age 54: a connection
/// first uses a token between 2 and 32 minutes after its `iat`, so it keeps it for at least 54 − 32 =
/// 22 minutes (2 minutes above Apple's 20, for the network's latency and the seconds the schedule
/// counts in), and leaves it at 54 minutes: before the hour even where the pod's clock runs up to 6
/// minutes behind Apple's.
/// At any moment at most two tokens of a key are in use: the current period's and, until its
/// connections reach the switch age, the one before. docs/apns-client.md has the arithmetic.
public struct APNsTokenSchedule: Sendable, Hashable {
    /// Seconds between two tokens' `iat`.
    public let period: Int64
    /// Seconds after its `iat` a token comes into use.
    public let adoptionDelay: Int64
    /// A connection's token age, in seconds, at which it takes the newest.
    public let switchAge: Int64

    /// The shortest a connection keeps a token, in seconds: the latest first use (a period and the
    /// adoption delay after the `iat`) to the switch age; 22 minutes with Apple's figures. Measured on
    /// a clock that never jumps, it holds whatever the wall clock does.
    public var minimumKeep: Int64 { switchAge - period - adoptionDelay }

    /// The oldest a token may be and still be sent, in seconds: APNs refuses one an hour old
    /// (ExpiredProviderToken). Two periods: 60 minutes with Apple's figures. A connection whose next
    /// token cannot be signed keeps its own until then.
    public var maximumAge: Int64 { period * 2 }

    /// Apple's figures: one token per 30 minutes.
    public static let apple = APNsTokenSchedule(periodSeconds: 1800)

    /// A schedule in proportion to Apple's (delay period/15, switch age 27·period/15): shorter periods
    /// are for tests against a simulator whose windows are scaled the same way. At least 15 seconds.
    public init(periodSeconds: Int64) {
        let period = max(periodSeconds, 15)
        self.period = period
        self.adoptionDelay = period / 15
        self.switchAge = period * 27 / 15
    }

    /// The `iat` of the token a new connection (or a request without one) uses at `now`.
    public func currentIssuedAt(now: Int64) -> Int64 {
        let since = now - adoptionDelay
        return (since >= 0 ? since / period : (since - period + 1) / period) * period
    }

    /// The `iat` of the token a connection uses at `now`: `bound` (the one it used so far) until it is
    /// `switchAge` old, then the current one. `nil` for a connection that has used none.
    public func issuedAt(bound: Int64?, now: Int64) -> Int64 {
        guard let bound, now - bound < switchAge else { return currentIssuedAt(now: now) }
        return bound
    }
}
