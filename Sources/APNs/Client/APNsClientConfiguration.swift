import NIOCore

/// How a client reaches APNs and how hard it pushes. Defaults suit production.
public struct APNsClientConfiguration: Sendable {
    public var environment: APNsEnvironment
    /// Overrides the environment's host (the simulator, a proxy).
    public var host: String?
    /// 443 (default) or 2197; anything for the simulator.
    public var port: Int
    public var tls: APNsTLSConfiguration
    /// Connections per (environment, credential).
    public var connectionsPerCredential: Int
    /// The most streams this client opens on one connection, whatever the server allows.
    public var maximumStreamsPerConnection: Int
    /// Requests that may wait for a free stream before `send` fails with `queueFull`.
    public var maximumWaitingRequests: Int
    /// Streams a request that is not urgent (`BatchItem.urgent`) leaves free for urgent ones,
    /// across the connections (at most half of their streams); 0: none kept. Urgent requests go
    /// before every other waiting for a stream either way.
    public var reservedUrgentStreams: Int = 0
    /// The deadline of each `send`, waiting for a stream included.
    public var requestTimeout: Duration
    /// TCP connect, and separately TLS handshake + first SETTINGS.
    public var connectTimeout: Duration
    /// PING after this long without a frame from the server.
    public var pingInterval: Duration
    /// A PING unanswered this long closes the connection.
    public var pingTimeout: Duration
    /// Reconnect backoff: first step, cap (jitter within each step).
    public var reconnectBase: Duration
    public var reconnectMaximum: Duration
    /// An HTTP proxy to tunnel through (CONNECT); `nil`: connect directly.
    public var proxy: APNsProxy?
    /// After `APNsClient.replaceCredential`, one connection opened with the credential before is
    /// replaced per interval (the first at a random point within one).
    public var replaceInterval: Duration = .seconds(15)
    /// Threads of the event loop group the client makes when it is given none.
    public var eventLoopThreads: Int = 1

    public init(
        environment: APNsEnvironment,
        host: String? = nil,
        port: Int = APNsEnvironment.defaultPort,
        tls: APNsTLSConfiguration = APNsTLSConfiguration(),
        connectionsPerCredential: Int = 2,
        maximumStreamsPerConnection: Int = 1000,
        maximumWaitingRequests: Int = 10_000,
        requestTimeout: Duration = .seconds(15),
        connectTimeout: Duration = .seconds(10),
        pingInterval: Duration = .seconds(60),
        pingTimeout: Duration = .seconds(10),
        reconnectBase: Duration = .seconds(1),
        reconnectMaximum: Duration = .seconds(60)
    ) {
        self.environment = environment
        self.host = host
        self.port = port
        self.tls = tls
        self.connectionsPerCredential = connectionsPerCredential
        self.maximumStreamsPerConnection = maximumStreamsPerConnection
        self.maximumWaitingRequests = maximumWaitingRequests
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.reconnectBase = reconnectBase
        self.reconnectMaximum = reconnectMaximum
    }

    var resolvedHost: String { host ?? environment.host }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

extension APNsCredential {
    /// A credential from command-line style parts: a `.p8` key with its team and key ids (token
    /// authentication), a PKCS#12 bundle, or a PEM certificate with its key; `password` opens the
    /// bundle or an encrypted key.
    public static func load(
        keyFile: String?, teamID: String?, keyID: String?, certificateFile: String?, certificateKeyFile: String?,
        pkcs12File: String?, password: String?
    ) throws -> APNsCredential {
        if let keyFile {
            guard let teamID, let keyID else {
                throw APNsCredentialError(.badIdentifier, "token authentication needs --team-id and --key-id")
            }
            return .token(try APNsTokenAuthenticator(teamID: teamID, keyID: keyID, key: APNsSigningKey(file: keyFile)))
        }
        if let pkcs12File {
            return .certificate(try APNsCertificateIdentity(pkcs12File: pkcs12File, password: password ?? ""))
        }
        if let certificateFile, let certificateKeyFile {
            return .certificate(
                try APNsCertificateIdentity(
                    certificateFile: certificateFile, keyFile: certificateKeyFile,
                    password: password.flatMap { $0.isEmpty ? nil : $0 }))
        }
        throw APNsCredentialError(
            .fileUnreadable, "give --key-file (token auth), --p12-file, or --cert-file with --cert-key-file")
    }
}

/// How a connection proves who sends.
public enum APNsCredential: Sendable {
    /// Token authentication: a JWT from this authenticator on every request.
    case token(APNsTokenAuthenticator)
    /// Certificate authentication: the TLS client certificate.
    case certificate(APNsCertificateIdentity)

    var kind: APNsAuthenticationKind {
        switch self {
        case .token: .token
        case .certificate: .certificate
        }
    }

    var identity: ObjectIdentifier {
        switch self {
        case .token(let authenticator): ObjectIdentifier(authenticator)
        case .certificate(let identity): ObjectIdentifier(identity)
        }
    }
}
