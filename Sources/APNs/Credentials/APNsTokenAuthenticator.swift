import Threading
import Foundation

/// The provider tokens (JWT, ES256) of one (team, key), for every connection that uses the key.
///
/// Tokens follow `APNsTokenSchedule`: issued at multiples of its period, signed deterministically
/// (RFC 6979), so every process of a fleet signs the same bytes for a period and APNs sees one token per
/// key, not one per pod. Each connection keeps the token it first used until that token reaches the
/// schedule's switch age (`token(forConnection:)`): at least 22 minutes, 6 minutes short of the hour.
///
/// The wall clock is read at each use (a clock corrected by NTP after start shows in the next token);
/// tests inject one and never sleep.
public final class APNsTokenAuthenticator: Sendable {
    /// 10-character Team ID (`iss`).
    public let teamID: String
    /// 10-character Key ID (`kid`).
    public let keyID: String
    public let schedule: APNsTokenSchedule
    private let key: APNsSigningKey
    /// Seconds since 1970, now.
    private let wallClock: @Sendable () -> Double
    /// A pthread mutex (visible to ThreadSanitizer, unlike Synchronization.Mutex's futex).
    private let state = Locked(State())

    private struct State {
        /// The two newest tokens signed, by `iat`: the current period's and the one before, which
        /// connections that started on it keep.
        var tokens: [Int64: APNsProviderToken] = [:]
        var signed = 0
        var switches = 0
    }

    /// Uses the system's wall clock.
    public convenience init(
        teamID: String, keyID: String, key: APNsSigningKey, schedule: APNsTokenSchedule = .apple
    ) throws(APNsCredentialError) {
        try self.init(
            teamID: teamID, keyID: keyID, key: key, schedule: schedule, wallClock: { Date().timeIntervalSince1970 })
    }

    /// For tests: the wall clock follows `clock`, from `epochNow` at this call.
    public convenience init<C: Clock>(
        teamID: String, keyID: String, key: APNsSigningKey, schedule: APNsTokenSchedule = .apple, clock: C,
        epochNow: Double
    ) throws(APNsCredentialError) where C.Duration == Duration {
        let start = clock.now
        try self.init(
            teamID: teamID, keyID: keyID, key: key, schedule: schedule,
            wallClock: { epochNow + Double(start.duration(to: clock.now).components.seconds) })
    }

    /// - Parameter wallClock: seconds since 1970, read at each use.
    public init(
        teamID: String, keyID: String, key: APNsSigningKey, schedule: APNsTokenSchedule = .apple,
        wallClock: @escaping @Sendable () -> Double
    ) throws(APNsCredentialError) {
        for (name, value) in [("team id", teamID), ("key id", keyID)] {
            let isAlphanumeric: (UInt8) -> Bool = {
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
            }
            guard value.utf8.count == 10, value.utf8.allSatisfy(isAlphanumeric) else {
                throw APNsCredentialError(.badIdentifier, "the \(name) must be 10 letters or digits")
            }
        }
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
        self.schedule = schedule
        self.wallClock = wallClock
    }

    private var now: Int64 { Int64(wallClock().rounded(.down)) }

    /// The token a new connection, or a request on no connection of its own, uses now: the current
    /// period's (signed now if it is the first use of it).
    public func currentToken() throws(APNsCredentialError) -> APNsProviderToken {
        try token(issuedAt: schedule.currentIssuedAt(now: now))
    }

    /// The token of a connection that has used `bound` so far (`nil`: none yet), and `bound` updated:
    /// it keeps its token until the schedule's switch age, then takes the current one. `nil` when a
    /// token cannot be signed (the key is unusable: `currentToken()` says why). A connection keeps
    /// its token itself, so a request that reuses it takes no lock.
    public func token(forConnection bound: inout APNsProviderToken?) -> APNsProviderToken? {
        let issuedAt = schedule.issuedAt(bound: bound?.issuedAt, now: now)
        if let bound, bound.issuedAt == issuedAt { return bound }
        guard let token = try? token(issuedAt: issuedAt) else { return nil }
        if bound != nil { state.withLock { $0.switches += 1 } }
        bound = token
        return token
    }

    /// The token of `issuedAt`: the same bytes for the same key and `iat`, wherever it is signed.
    public func token(issuedAt: Int64) throws(APNsCredentialError) -> APNsProviderToken {
        if let token = state.withLock({ $0.tokens[issuedAt] }) { return token }
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#
        let signingInput = base64URL(Array(header.utf8)) + "." + base64URL(Array(claims.utf8))
        let signature = try key.signDeterministic(Array(signingInput.utf8))
        let token = APNsProviderToken(
            jwt: signingInput + "." + base64URL(signature), issuedAt: issuedAt, keyID: keyID)
        state.withLock { state in
            guard state.tokens[issuedAt] == nil else { return }
            state.signed += 1
            state.tokens[issuedAt] = token
            // Only the newest two are ever asked for again (a connection's token is at most the
            // one before the current).
            while state.tokens.count > 2, let oldest = state.tokens.keys.min() { state.tokens[oldest] = nil }
        }
        return token
    }

    /// How many distinct tokens this authenticator has signed (one per period in use).
    public var tokensSigned: Int { state.withLock { $0.signed } }

    /// How many times a connection went from its token to a newer one.
    public var tokenSwitches: Int { state.withLock { $0.switches } }
}

/// A signed provider token. Its `description` never shows the signature.
public struct APNsProviderToken: Sendable, Hashable, CustomStringConvertible {
    /// The compact JWT (header.claims.signature).
    public let jwt: String
    /// The `iat` claim.
    public let issuedAt: Int64
    let keyID: String

    /// The `authorization` header value.
    public var authorization: String { "bearer " + jwt }

    public var description: String { "token(kid: \(keyID), iat: \(issuedAt))" }
}

/// RFC 7515 base64url without padding.
func base64URL(_ bytes: [UInt8]) -> String {
    var text = Data(bytes).base64EncodedString()
    text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    while text.hasSuffix("=") { text.removeLast() }
    return text
}
