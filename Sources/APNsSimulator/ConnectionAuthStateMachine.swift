/// How a request on a connection was authorized.
package enum RequestAuthorization: Sendable {
    /// Provider token of this team (token-based trust).
    case token(VerifiedProviderToken)
    /// Client certificate with these topics (certificate-based trust).
    case certificate(ClientCertificateIdentity)
    /// The simulator runs with authentication switched off.
    case none
}

/// Per-connection provider-token rules: one team per connection, then only the first token's key or its
/// related key (UnrelatedKeyIdInToken otherwise); a token change less than the update window after the
/// connection first used its current token is 429 TooManyProviderTokenUpdates, and the connection then
/// refuses every request (429 TooManyProviderTokenUpdates) until a window has passed since that refusal;
/// the stream limit raised after the first request whose token verified. A token new to the connection
/// is also put to the simulator-wide per-key rule (``ProviderTokenLedger``). Lives on the connection's
/// event loop; no lock of its own.
package struct ConnectionAuthStateMachine {
    package enum Mode {
        case token
        case certificate(ClientCertificateIdentity)
        /// Neither keys nor a client CA configured: requests without credentials are accepted.
        case open
    }

    package enum Action {
        /// Go on with the request. `raiseStreamLimit` is true exactly once: for the first authorized request.
        case authorized(RequestAuthorization, raiseStreamLimit: Bool)
        case refuse(SimulatorReason)
    }

    private let mode: Mode
    private let updateWindow: Double
    private var team: String?
    /// The key of the first token that verified on this connection.
    private var firstKeyID: String?
    private var currentHeader: String?
    private var current: VerifiedProviderToken?
    /// When the connection first used its current token.
    private var currentSince = 0.0
    /// After a token change refused as too soon: every request is refused until then.
    private var unusableUntil: Double?
    private var authorizedOnce = false

    /// `tokenUpdateWindow`: seconds a connection keeps a token before it may change it, and stays
    /// unusable after changing too soon; 0 switches the rule off.
    package init(mode: Mode, tokenUpdateWindow: Double) {
        self.mode = mode
        self.updateWindow = tokenUpdateWindow
    }

    /// Whether this connection starts with the single-stream limit (token trust) or not (certificate).
    var startsRestricted: Bool {
        if case .token = mode { return true }
        return false
    }

    /// `ledger`: the simulator's per-key rule and counts; `nil` leaves them out (the fuzz targets).
    package mutating func authorize(
        header: String?, now: Double, verifier: ProviderTokenVerifier, ledger: ProviderTokenLedger? = nil
    ) -> Action {
        switch mode {
        case .certificate(let identity):
            // "When the provider certificate is used to establish a connection, this request header is ignored."
            return .authorized(.certificate(identity), raiseStreamLimit: false)
        case .open:
            return .authorized(.none, raiseStreamLimit: false)
        case .token:
            break
        }
        if let until = unusableUntil {
            // "That connection will be unusable until enough time has passed": every request is refused,
            // whatever it carries; the connection stays open.
            if now < until {
                ledger?.refusedOnUnusableConnection(keyID: current?.keyID ?? firstKeyID ?? "")
                return .refuse(.tooManyProviderTokenUpdates)
            }
            unusableUntil = nil
        }
        guard let header else { return .refuse(.missingProviderToken) }
        if header == currentHeader, let current {
            if now - current.issuedAt > ProviderTokenVerifier.tokenLifetime { return .refuse(.expiredProviderToken) }
            return .authorized(.token(current), raiseStreamLimit: false)
        }
        let verified: VerifiedProviderToken
        switch verifier.verify(authorization: header, now: now) {
        case .failure(let reason): return .refuse(reason)
        case .success(let token): verified = token
        }
        if let team, team != verified.teamID {
            // One team per connection: a token of another team is not valid here.
            return .refuse(.invalidProviderToken)
        }
        if let firstKeyID, !verifier.areRelated(firstKeyID, verified.keyID) {
            // "The key ID in the provider token isn't related to the key ID of the token used in the
            // first push of this connection."
            return .refuse(.unrelatedKeyIdInToken)
        }
        let token = String(ProviderTokenVerifier.bearerToken(header) ?? "")
        if current != nil, now - currentSince < updateWindow {
            // The first token is always taken; a change counts from when this connection first used the
            // token it replaces, however old that token was then.
            unusableUntil = now + updateWindow
            ledger?.tooEarlyUpdate(token: token, keyID: verified.keyID, now: now)
            return .refuse(.tooManyProviderTokenUpdates)
        }
        if let ledger, ledger.admit(token: token, keyID: verified.keyID, now: now) == .overLimit {
            // Too many tokens of this key across the simulator: this request only.
            return .refuse(.tooManyProviderTokenUpdates)
        }
        currentSince = now
        team = verified.teamID
        if firstKeyID == nil { firstKeyID = verified.keyID }
        currentHeader = header
        current = verified
        let first = !authorizedOnce
        authorizedOnce = true
        return .authorized(.token(verified), raiseStreamLimit: first)
    }
}
