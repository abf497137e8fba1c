/// A connection pool's state at one moment (a pool per credential; a client's figures add up its
/// pools'). For gauges: connections by state, streams in use against what the server allows, and
/// requests waiting for a stream.
public struct APNsPoolStatistics: Sendable, Equatable {
    /// Open and taking requests.
    public var readyConnections = 0
    /// Being opened (TCP, TLS, HTTP/2 settings).
    public var connectingConnections = 0
    /// After GOAWAY: finishing their requests, taking no new ones.
    public var drainingConnections = 0
    /// Requests on a stream (sent or being sent, not yet answered), draining connections included.
    public var streamsInUse = 0
    /// The sum of the ready connections' MAX_CONCURRENT_STREAMS.
    public var streamCapacity = 0
    /// Requests waiting for a free stream.
    public var waitingRequests = 0
    /// Connections retired so far because APNs would not take their provider token any more, by
    /// APNs's reason (TooManyProviderTokenUpdates, UnrelatedKeyIdInToken), or replaced after their
    /// credential was reloaded (`credentialReloaded`).
    public var retiredConnections: [String: Int] = [:]

    /// The `retiredConnections` reason of a connection replaced after its credential was reloaded.
    public static let credentialReloaded = "CredentialReloaded"

    public init() {}

    /// Two pools' figures added up (a credential's pools across clients, or lanes).
    public static func + (lhs: Self, rhs: Self) -> Self {
        var sum = lhs
        sum.readyConnections += rhs.readyConnections
        sum.connectingConnections += rhs.connectingConnections
        sum.drainingConnections += rhs.drainingConnections
        sum.streamsInUse += rhs.streamsInUse
        sum.streamCapacity += rhs.streamCapacity
        sum.waitingRequests += rhs.waitingRequests
        sum.retiredConnections.merge(rhs.retiredConnections, uniquingKeysWith: +)
        return sum
    }
}
