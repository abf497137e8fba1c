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
    /// Seconds on a clock that never jumps (since any fixed point): how long a connection has kept
    /// its token is measured on it, so that a wall clock stepped by NTP cannot make a connection
    /// change its token too soon.
    private let monotonic: @Sendable () -> Int64
    /// Called (outside any lock) when the wall clock moved against the monotonic one by this many
    /// seconds (30 or more) since the last look: a clock stepped, or a pod resumed.
    private let onClockJump: (@Sendable (Int64) -> Void)?
    /// Called (outside any lock) when a token could not be signed, with why and the token the
    /// connection keeps meanwhile (`nil`: it has none it may keep, and its request goes without).
    private let onSigningFailure: (@Sendable (APNsCredentialError, APNsProviderToken?) -> Void)?
    /// A pthread mutex (visible to ThreadSanitizer, unlike Synchronization.Mutex's futex).
    private let state = Locked(State())

    private struct State {
        /// The two newest tokens signed, by `iat`: the current period's and the one before, which
        /// connections that started on it keep.
        var tokens: [Int64: APNsProviderToken] = [:]
        var signed = 0
        var switches = 0
        /// The wall clock minus the monotonic one at the last look, and the jumps seen.
        var offset: Int64?
        var clockJumps = 0
        /// Tokens that could not be signed, and the last failure: the `iat` tried and when
        /// (monotonic seconds), so that a connection keeping its token retries at most every
        /// `signingRetryInterval`.
        var signingFailures = 0
        var lastFailure: (issuedAt: Int64, at: Int64)?
    }

    /// Seconds between two attempts to sign a token that could not be signed, while connections keep
    /// the token they have.
    static let signingRetryInterval: Int64 = 10

    /// Uses the system's wall clock, and its monotonic clock for how long a connection kept a token.
    public convenience init(
        teamID: String, keyID: String, key: APNsSigningKey, schedule: APNsTokenSchedule = .apple,
        onClockJump: (@Sendable (Int64) -> Void)? = nil,
        onSigningFailure: (@Sendable (APNsCredentialError, APNsProviderToken?) -> Void)? = nil
    ) throws(APNsCredentialError) {
        let start = ContinuousClock.now
        try self.init(
            teamID: teamID, keyID: keyID, key: key, schedule: schedule, wallClock: { Date().timeIntervalSince1970 },
            monotonic: { (ContinuousClock.now - start).components.seconds }, onClockJump: onClockJump,
            onSigningFailure: onSigningFailure)
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

    /// - Parameters:
    ///   - wallClock: seconds since 1970, read at each use.
    ///   - monotonic: seconds on a clock that never jumps; `nil`: the wall clock's (tests whose wall
    ///     clock only moves forward, as a monotonic one would).
    public init(
        teamID: String, keyID: String, key: APNsSigningKey, schedule: APNsTokenSchedule = .apple,
        wallClock: @escaping @Sendable () -> Double, monotonic: (@Sendable () -> Int64)? = nil,
        onClockJump: (@Sendable (Int64) -> Void)? = nil,
        onSigningFailure: (@Sendable (APNsCredentialError, APNsProviderToken?) -> Void)? = nil
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
        self.monotonic = monotonic ?? { Int64(wallClock().rounded(.down)) }
        self.onClockJump = onClockJump
        self.onSigningFailure = onSigningFailure
    }

    private var now: Int64 { Int64(wallClock().rounded(.down)) }

    /// Whether `other` signs with the same key (its public key; the ids are not compared).
    public func hasSameKey(as other: APNsTokenAuthenticator) -> Bool {
        key.isSameKey(as: other.key)
    }

    /// The token a new connection, or a request on no connection of its own, uses now: the current
    /// period's (signed now if it is the first use of it).
    public func currentToken() throws(APNsCredentialError) -> APNsProviderToken {
        try token(issuedAt: schedule.currentIssuedAt(now: now))
    }

    /// The token of a connection that has used `binding`'s so far (`nil`: none yet), and `binding`
    /// updated: it keeps its token until the schedule's switch age, then takes the current one. When
    /// the current one cannot be signed, the connection keeps its token while that is younger than
    /// the schedule's `maximumAge` (APNs refuses a token an hour old), and signing is tried again
    /// every `signingRetryInterval`; each failure is counted and said through `onSigningFailure`.
    /// `nil` only when there is no token to keep (the key is unusable: `currentToken()` says why). A
    /// connection keeps its binding itself, so a request that reuses its token takes no lock.
    ///
    /// How long the connection has kept its token is measured on the monotonic clock: it never
    /// changes it before `APNsTokenSchedule.minimumKeep` (22 minutes) there, however the wall clock
    /// jumps; and it changes it once the token is `switchAge` old by either clock (the wall clock's
    /// age, or its age when first used plus the time kept), never for an older one.
    public func token(forConnection binding: inout APNsTokenBinding?) -> APNsProviderToken? {
        let now = self.now
        let mono = monotonic()
        if let bound = binding {
            // (Whole seconds of two clocks: their difference wavers by one; a jump is 30 or more.)
            if abs(now - mono - bound.offset) >= 30 { noticeOffset(now - mono, in: &binding) }
            let kept = mono - bound.since
            let age = max(now - bound.token.issuedAt, bound.ageAtFirstUse + kept)
            guard kept >= schedule.minimumKeep, age >= schedule.switchAge else { return bound.token }
            let issuedAt = schedule.currentIssuedAt(now: now)
            // A wall clock stepped back has nothing newer to offer: the token stays (APNs judges its
            // age by its own clock; the step says this pod's was ahead).
            guard issuedAt > bound.token.issuedAt else { return bound.token }
            let young = now - bound.token.issuedAt < schedule.maximumAge
            let next: APNsProviderToken
            do {
                guard
                    let signed = try token(
                        issuedAt: issuedAt, retryingAfterFailureAt: mono, keeping: young ? bound.token : nil)
                else { return bound.token }
                next = signed
            } catch {
                return young ? bound.token : nil
            }
            state.withLock { $0.switches += 1 }
            binding = APNsTokenBinding(token: next, since: mono, ageAtFirstUse: now - issuedAt, offset: now - mono)
            return next
        }
        guard
            let token = try? token(
                issuedAt: schedule.currentIssuedAt(now: now), retryingAfterFailureAt: nil, keeping: nil)
        else { return nil }
        binding = APNsTokenBinding(
            token: token, since: mono, ageAtFirstUse: now - token.issuedAt, offset: now - mono)
        return token
    }

    /// The wall clock moved against the monotonic one since this connection last looked: counted
    /// once for the process (the first connection to see it), and said through `onClockJump`.
    private func noticeOffset(_ offset: Int64, in binding: inout APNsTokenBinding?) {
        binding?.offset = offset
        let jump: Int64? = state.withLock { state in
            defer { state.offset = offset }
            guard let before = state.offset, abs(offset - before) >= 30 else { return nil }
            state.clockJumps += 1
            return offset - before
        }
        if let jump { onClockJump?(jump) }
    }

    /// The token of `issuedAt` for a connection: `nil` when signing it failed less than
    /// `signingRetryInterval` before `mono` (the connection keeps its token without trying again);
    /// a failure is counted and said, with the token the connection keeps (`keeping`).
    private func token(issuedAt: Int64, retryingAfterFailureAt mono: Int64?, keeping: APNsProviderToken?)
        throws(APNsCredentialError) -> APNsProviderToken?
    {
        if let mono, keeping != nil {
            let wait = state.withLock { state -> Bool in
                guard state.tokens[issuedAt] == nil, let failure = state.lastFailure, failure.issuedAt == issuedAt
                else { return false }
                return mono - failure.at < Self.signingRetryInterval
            }
            if wait { return nil }
        }
        do {
            return try token(issuedAt: issuedAt)
        } catch {
            let at = monotonic()
            state.withLock { $0.lastFailure = (issuedAt, at) }
            onSigningFailure?(error, keeping)
            throw error
        }
    }

    /// The token of `issuedAt`: the same bytes for the same key and `iat`, wherever it is signed. A
    /// failure to sign is counted (`signingFailures`).
    public func token(issuedAt: Int64) throws(APNsCredentialError) -> APNsProviderToken {
        if let token = state.withLock({ $0.tokens[issuedAt] }) { return token }
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#
        let signingInput = base64URL(Array(header.utf8)) + "." + base64URL(Array(claims.utf8))
        let signature: [UInt8]
        do {
            signature = try key.signDeterministic(Array(signingInput.utf8))
        } catch {
            state.withLock { $0.signingFailures += 1 }
            throw error
        }
        let offset = now - monotonic()
        let token = APNsProviderToken(
            jwt: signingInput + "." + base64URL(signature), issuedAt: issuedAt, keyID: keyID)
        state.withLock { state in
            if state.offset == nil { state.offset = offset }
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

    /// How many times a token could not be signed.
    public var signingFailures: Int { state.withLock { $0.signingFailures } }

    /// How many times a connection went from its token to a newer one.
    public var tokenSwitches: Int { state.withLock { $0.switches } }

    /// How many times the wall clock was seen to jump (30 s or more) against the monotonic clock.
    public var clockJumps: Int { state.withLock { $0.clockJumps } }
}

/// A connection's provider token and since when it uses it: kept by the connection, updated by
/// `APNsTokenAuthenticator.token(forConnection:)`.
public struct APNsTokenBinding: Sendable, Hashable {
    public let token: APNsProviderToken
    /// Monotonic seconds when the connection first used it.
    let since: Int64
    /// The token's age by the wall clock then.
    let ageAtFirstUse: Int64
    /// The wall clock minus the monotonic one, when the connection last looked.
    var offset: Int64
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
