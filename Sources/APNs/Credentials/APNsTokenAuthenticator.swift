import Threading
import Foundation

/// The provider token (JWT, ES256) of one (team, key), shared by every connection that uses it.
///
/// Apple rejects a token older than an hour (`ExpiredProviderToken`) and one replaced too often
/// (`TooManyProviderTokenUpdates`). So a token is reused until it is 50 minutes old, and a refresh is
/// never made less than 20 minutes after the previous one, even when APNs says it expired (clock
/// skew): one key never signs more than three tokens an hour, whatever the number of connections.
///
/// Time comes from an injected `Clock` (the token's age) and a wall clock read at each signing (the
/// `iat` claim: a clock corrected after start, by NTP for one, is reflected in the next token), so
/// tests drive refreshes with a manual clock and never sleep.
public final class APNsTokenAuthenticator: Sendable {
    public static let refreshAge: Duration = .seconds(50 * 60)
    public static let minimumRefreshInterval: Duration = .seconds(20 * 60)

    /// 10-character Team ID (`iss`).
    public let teamID: String
    /// 10-character Key ID (`kid`).
    public let keyID: String
    private let key: APNsSigningKey
    /// Time since this authenticator was created, from the injected clock.
    private let elapsed: @Sendable () -> Duration
    /// Seconds since 1970, now: the `iat` of a token signed now.
    private let wallClock: @Sendable () -> Double
    /// A pthread mutex (visible to ThreadSanitizer, unlike Synchronization.Mutex's futex).
    private let state = Locked(State())

    private struct State {
        var token: APNsProviderToken?
        var mintedAt: Duration = .zero
        var issued = 0
    }

    /// Uses the system's continuous clock and wall clock.
    public convenience init(teamID: String, keyID: String, key: APNsSigningKey) throws(APNsCredentialError) {
        try self.init(
            teamID: teamID, keyID: keyID, key: key, clock: ContinuousClock(),
            wallClock: { Date().timeIntervalSince1970 })
    }

    /// For tests: the wall clock follows `clock`, from `epochNow` at this call.
    public convenience init<C: Clock>(
        teamID: String, keyID: String, key: APNsSigningKey, clock: C, epochNow: Double
    ) throws(APNsCredentialError) where C.Duration == Duration {
        let start = clock.now
        try self.init(
            teamID: teamID, keyID: keyID, key: key, clock: clock,
            wallClock: { epochNow + Double(start.duration(to: clock.now).components.seconds) })
    }

    /// - Parameters:
    ///   - clock: measures token age.
    ///   - wallClock: seconds since 1970, read at each signing for the `iat` claim.
    public init<C: Clock>(
        teamID: String, keyID: String, key: APNsSigningKey, clock: C,
        wallClock: @escaping @Sendable () -> Double
    ) throws(APNsCredentialError) where C.Duration == Duration {
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
        let start = clock.now
        self.elapsed = { start.duration(to: clock.now) }
        self.wallClock = wallClock
    }

    /// The token to send now: the current one, or a new one when it is 50 minutes old.
    public func currentToken() throws(APNsCredentialError) -> APNsProviderToken {
        let now = elapsed()
        return try state.withLock { state -> Result<APNsProviderToken, APNsCredentialError> in
            if let token = state.token, now - state.mintedAt < Self.refreshAge { return .success(token) }
            return Result { () throws(APNsCredentialError) in try mint(&state, at: now) }
        }.get()
    }

    /// APNs answered `ExpiredProviderToken` for `token`. Replaces it if it is still the current token
    /// and at least 20 minutes old; otherwise keeps it (another connection already refreshed, or a
    /// refresh now would provoke `TooManyProviderTokenUpdates`).
    ///
    /// - Returns: whether the next `currentToken()` differs from `token`.
    @discardableResult
    public func tokenExpired(_ token: APNsProviderToken) throws(APNsCredentialError) -> Bool {
        let now = elapsed()
        return try state.withLock { state -> Result<Bool, APNsCredentialError> in
            guard let current = state.token, current.generation == token.generation else { return .success(true) }
            guard now - state.mintedAt >= Self.minimumRefreshInterval else { return .success(false) }
            return Result { () throws(APNsCredentialError) in
                _ = try mint(&state, at: now)
                return true
            }
        }.get()
    }

    /// How many tokens this authenticator has signed (for metrics and tests).
    public var tokensIssued: Int { state.withLock { $0.issued } }

    private func mint(_ state: inout State, at now: Duration) throws(APNsCredentialError) -> APNsProviderToken {
        let issuedAt = Int64(wallClock().rounded(.down))
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#
        let signingInput = base64URL(Array(header.utf8)) + "." + base64URL(Array(claims.utf8))
        let signature = try key.sign(Array(signingInput.utf8))
        state.issued += 1
        let token = APNsProviderToken(
            jwt: signingInput + "." + base64URL(signature), issuedAt: issuedAt, generation: state.issued,
            keyID: keyID)
        state.token = token
        state.mintedAt = now
        return token
    }
}

/// A signed provider token. Its `description` never shows the signature.
public struct APNsProviderToken: Sendable, Hashable, CustomStringConvertible {
    /// The compact JWT (header.claims.signature).
    public let jwt: String
    /// The `iat` claim.
    public let issuedAt: Int64
    /// 1 for the first token of an authenticator, then 2, 3, …
    public let generation: Int
    let keyID: String

    /// The `authorization` header value.
    public var authorization: String { "bearer " + jwt }

    public var description: String { "token(kid: \(keyID), iat: \(issuedAt), #\(generation))" }
}

/// RFC 7515 base64url without padding.
func base64URL(_ bytes: [UInt8]) -> String {
    var text = Data(bytes).base64EncodedString()
    text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    while text.hasSuffix("=") { text.removeLast() }
    return text
}
