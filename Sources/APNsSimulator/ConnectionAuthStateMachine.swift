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
/// related key (UnrelatedKeyIdInToken otherwise), a token change at most once per window
/// (TooManyProviderTokenUpdates otherwise), the stream limit raised after the first request whose token
/// verified. Lives on the connection's event loop; no lock.
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
    private var lastChange: Double?
    private var authorizedOnce = false

    package init(mode: Mode, tokenUpdateWindow: Double) {
        self.mode = mode
        self.updateWindow = tokenUpdateWindow
    }

    /// Whether this connection starts with the single-stream limit (token trust) or not (certificate).
    var startsRestricted: Bool {
        if case .token = mode { return true }
        return false
    }

    package mutating func authorize(header: String?, now: Double, verifier: ProviderTokenVerifier) -> Action {
        switch mode {
        case .certificate(let identity):
            // "When the provider certificate is used to establish a connection, this request header is ignored."
            return .authorized(.certificate(identity), raiseStreamLimit: false)
        case .open:
            return .authorized(.none, raiseStreamLimit: false)
        case .token:
            break
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
        if currentHeader != nil {
            if let lastChange, now - lastChange < updateWindow { return .refuse(.tooManyProviderTokenUpdates) }
            lastChange = now
        }
        team = verified.teamID
        if firstKeyID == nil { firstKeyID = verified.keyID }
        currentHeader = header
        current = verified
        let first = !authorizedOnce
        authorizedOnce = true
        return .authorized(.token(verified), raiseStreamLimit: first)
    }
}
