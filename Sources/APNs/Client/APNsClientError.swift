/// Why a notification got no answer from APNs. Every failure that is not an HTTP response is one of
/// these; `classify` maps it to the outcome table.
public struct APNsClientError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// TCP connect or DNS failed.
        public static let connectFailed = Code(rawValue: "connectFailed")
        /// The TLS handshake failed for a reason other than the server's certificate.
        public static let tlsHandshakeFailed = Code(rawValue: "tlsHandshakeFailed")
        /// The server's certificate chain or host name did not verify. Not retriable: it is a
        /// configuration problem (or an attack).
        public static let serverCertificateRejected = Code(rawValue: "serverCertificateRejected")
        /// The server did not agree to HTTP/2 through ALPN.
        public static let alpnRefused = Code(rawValue: "alpnRefused")
        /// The connection closed (or broke) while the request was in flight.
        public static let connectionLost = Code(rawValue: "connectionLost")
        /// The server sent GOAWAY and this request's stream was above its last-stream-id (never processed).
        public static let goAway = Code(rawValue: "goAway")
        /// The server answered no PING in time; the connection was closed.
        public static let pingTimeout = Code(rawValue: "pingTimeout")
        /// The server reset the stream (RST_STREAM) before answering.
        public static let streamReset = Code(rawValue: "streamReset")
        /// The request's deadline passed before an answer.
        public static let deadlineExceeded = Code(rawValue: "deadlineExceeded")
        /// Every stream of every connection was busy and the wait queue was full.
        public static let queueFull = Code(rawValue: "queueFull")
        /// The client is shutting down and takes no new requests.
        public static let shutDown = Code(rawValue: "shutDown")
        /// The HTTP/2 layer (nghttp2) refused the request or broke the connection.
        public static let protocolError = Code(rawValue: "protocolError")
        /// The credential could not produce a token.
        public static let credentialUnusable = Code(rawValue: "credentialUnusable")
        /// No credential is configured for the notification's topic.
        public static let noCredentialForTopic = Code(rawValue: "noCredentialForTopic")
    }

    public let code: Code
    public let message: String

    /// The server never processed the request, which may go again on another connection at once
    /// (RFC 9113 §6.8): its stream was above a GOAWAY's last-stream-id, it was not written because
    /// the connection was closing, or the connection it was given to had already gone.
    public var wasNotProcessed: Bool {
        !mayHaveReachedAPNs && (code == .goAway || code == .connectionLost)
    }
    /// Whether the request may have reached APNs (and so may be delivered even though this failed).
    /// `false` means it certainly never left this process, or the server said it did not process it.
    public let mayHaveReachedAPNs: Bool
    /// The JSON `reason` of a GOAWAY frame, when the connection ended with one.
    public var goAwayReason: String?
    /// OpenSSL's error queue and certificate verification result, for TLS failures.
    public var tlsDetail: [String]

    public init(
        _ code: Code, _ message: String, mayHaveReachedAPNs: Bool, goAwayReason: String? = nil,
        tlsDetail: [String] = []
    ) {
        self.code = code
        self.message = message
        self.mayHaveReachedAPNs = mayHaveReachedAPNs
        self.goAwayReason = goAwayReason
        self.tlsDetail = tlsDetail
    }

    /// Whether trying again later (on this or another connection) can succeed.
    public var isRetriable: Bool {
        switch code {
        case .serverCertificateRejected, .alpnRefused, .credentialUnusable, .noCredentialForTopic, .shutDown:
            false
        default:
            true
        }
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let goAwayReason { text += " (GOAWAY \(goAwayReason))" }
        if !tlsDetail.isEmpty { text += " [\(tlsDetail.joined(separator: "; "))]" }
        return text
    }
}
