import NIOCore

/// The Kafka messages a SASL-terminating proxy reads and answers itself (Kafka protocol guide,
/// KIP-43 and KIP-152), and the ApiVersions answer it extends to announce them. Frames are without
/// their 4-byte size prefix.
///
/// - SaslHandshake (key 17) v0-1, request header v1 (`int16 key, int16 version, int32 correlation,
///   nullable string client_id`), body `string mechanism`; the answer (header v0: the correlation id)
///   `int16 error_code, [string] mechanisms`.
/// - SaslAuthenticate (key 36) v0-1, body `bytes auth_bytes`; the answer `int16 error_code, nullable
///   string error_message, bytes auth_bytes` and, from v1, `int64 session_lifetime_ms`. v2 is
///   flexible and not offered.
/// - PLAIN's auth bytes (RFC 4616): `authzid NUL authcid NUL password`.
package enum KafkaSASLWire {
    package static let saslHandshakeKey: Int16 = 17
    package static let saslAuthenticateKey: Int16 = 36
    /// Kafka's SASL_AUTHENTICATION_FAILED and UNSUPPORTED_SASL_MECHANISM.
    package static let authenticationFailed: Int16 = 58
    package static let unsupportedMechanism: Int16 = 33
    /// What the proxy answers for, with the versions it speaks.
    package static let offeredVersions: [(key: Int16, min: Int16, max: Int16)] = [
        (saslHandshakeKey, 0, 1), (saslAuthenticateKey, 0, 1),
    ]

    package struct RequestHeader: Equatable, Sendable {
        package var key: Int16
        package var version: Int16
        package var correlation: Int32
    }

    /// The first three fields of any request header.
    package static func header(of frame: ByteBuffer) -> RequestHeader? {
        guard let key = frame.getInteger(at: frame.readerIndex, as: Int16.self),
            let version = frame.getInteger(at: frame.readerIndex + 2, as: Int16.self),
            let correlation = frame.getInteger(at: frame.readerIndex + 4, as: Int32.self)
        else { return nil }
        return RequestHeader(key: key, version: version, correlation: correlation)
    }

    /// The body of a request with header v1 (past the client id).
    static func body(of frame: ByteBuffer) -> ByteBuffer? {
        var buffer = frame
        guard buffer.readSlice(length: 8) != nil, let idLength = buffer.readInteger(as: Int16.self) else { return nil }
        if idLength > 0 { guard buffer.readSlice(length: Int(idLength)) != nil else { return nil } }
        return buffer
    }

    /// The mechanism a SaslHandshake asks for.
    package static func mechanism(handshake frame: ByteBuffer) -> String? {
        guard var body = body(of: frame), let length = body.readInteger(as: Int16.self), length >= 0 else { return nil }
        return body.readString(length: Int(length))
    }

    /// The auth bytes of a SaslAuthenticate v0-1.
    package static func authBytes(authenticate frame: ByteBuffer) -> [UInt8]? {
        guard var body = body(of: frame), let length = body.readInteger(as: Int32.self), length >= 0 else { return nil }
        return body.readBytes(length: Int(length))
    }

    /// PLAIN's user and password, or nil when the bytes are not `authzid NUL user NUL password`.
    package static func plainCredentials(_ bytes: [UInt8]) -> (username: String, password: String)? {
        let parts = bytes.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        return (String(decoding: parts[1], as: UTF8.self), String(decoding: parts[2], as: UTF8.self))
    }

    package static func handshakeResponse(correlation: Int32, error: Int16, mechanisms: [String]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(correlation)
        buffer.writeInteger(error)
        buffer.writeInteger(Int32(mechanisms.count))
        for mechanism in mechanisms {
            buffer.writeInteger(Int16(mechanism.utf8.count))
            buffer.writeString(mechanism)
        }
        return buffer
    }

    package static func authenticateResponse(correlation: Int32, version: Int16, error: Int16, message: String?)
        -> ByteBuffer
    {
        var buffer = ByteBuffer()
        buffer.writeInteger(correlation)
        buffer.writeInteger(error)
        if let message {
            buffer.writeInteger(Int16(message.utf8.count))
            buffer.writeString(message)
        } else {
            buffer.writeInteger(Int16(-1))
        }
        buffer.writeInteger(Int32(0))  // PLAIN's server sends no bytes back
        if version >= 1 { buffer.writeInteger(Int64(0)) }  // no session lifetime: no re-authentication
        return buffer
    }

    /// An ApiVersions v3+ answer (without its size prefix) that also lists `keys` (replacing the
    /// broker's entries for them), every tag section emptied; nil when it does not parse to its end.
    /// Layout: correlation_id int32, error_code int16, api_keys compact array (uvarint count + 1) of
    /// { api_key int16, min int16, max int16, tags }, throttle_time_ms int32, tags.
    package static func addingKeys(_ keys: [(key: Int16, min: Int16, max: Int16)], to response: ByteBuffer)
        -> ByteBuffer?
    {
        typealias Rewrite = KafkaWire
        var input = response
        guard let header = input.readSlice(length: 6), let countPlusOne = Rewrite.readUVarint(&input), countPlusOne >= 1
        else { return nil }
        var entries: [(key: Int16, min: Int16, max: Int16)] = []
        for _ in 0..<(countPlusOne - 1) {
            guard let key = input.readInteger(as: Int16.self), let min = input.readInteger(as: Int16.self),
                let max = input.readInteger(as: Int16.self), Rewrite.skipTags(&input)
            else { return nil }
            if !keys.contains(where: { $0.key == key }) { entries.append((key, min, max)) }
        }
        guard let throttle = input.readSlice(length: 4), Rewrite.skipTags(&input), input.readableBytes == 0 else {
            return nil
        }
        entries = (entries + keys).sorted { $0.key < $1.key }
        var output = ByteBuffer()
        output.writeImmutableBuffer(header)
        Rewrite.writeUVarint(UInt64(entries.count + 1), to: &output)
        for entry in entries {
            output.writeInteger(entry.key)
            output.writeInteger(entry.min)
            output.writeInteger(entry.max)
            output.writeInteger(UInt8(0))
        }
        output.writeImmutableBuffer(throttle)
        output.writeInteger(UInt8(0))
        return output
    }
}

/// One connection's SASL exchange in front of the broker: what to do with each request the client
/// sends. Pure; the proxy performs the answer.
package struct KafkaSASLGate: Sendable {
    package enum State: Equatable, Sendable {
        /// Nothing but ApiVersions seen yet.
        case opening
        /// PLAIN chosen by a SaslHandshake; SaslAuthenticate comes next.
        case handshaken
        case authenticated
        /// A client that sent a request other than ApiVersions before any handshake, let through
        /// (`ProxySecurity.admitsPlainClients`).
        case plain
    }

    package enum Action: Equatable, Sendable {
        /// To the broker as it is.
        case forward
        /// An ApiVersions request: to the broker, and its answer extended with the SASL keys.
        case forwardExtendingAnswer(correlation: Int32)
        /// Answered here; the connection stays.
        case answer(ByteBuffer)
        /// Answered here, then the connection closes (a failed authentication, as a broker does).
        case answerAndClose(ByteBuffer)
        /// Closed at once: a request the client may not make yet.
        case refuse
    }

    package let user: ProxySecurity.SASLPlain
    package let admitsPlainClients: Bool
    package private(set) var state = State.opening

    package init(user: ProxySecurity.SASLPlain, admitsPlainClients: Bool) {
        self.user = user
        self.admitsPlainClients = admitsPlainClients
    }

    package mutating func request(_ frame: ByteBuffer) -> Action {
        guard let header = KafkaSASLWire.header(of: frame) else { return .refuse }
        switch (state, header.key) {
        case (.authenticated, _), (.plain, _):
            return .forward
        case (.opening, KafkaWire.apiVersionsKey):
            return header.version >= 3 ? .forwardExtendingAnswer(correlation: header.correlation) : .forward
        case (.opening, KafkaSASLWire.saslHandshakeKey):
            let mechanism = KafkaSASLWire.mechanism(handshake: frame)
            let accepted = mechanism == "PLAIN"
            if accepted { state = .handshaken }
            return .answer(
                KafkaSASLWire.handshakeResponse(
                    correlation: header.correlation, error: accepted ? 0 : KafkaSASLWire.unsupportedMechanism,
                    mechanisms: ["PLAIN"]))
        case (.handshaken, KafkaSASLWire.saslAuthenticateKey):
            let credentials = KafkaSASLWire.authBytes(authenticate: frame).flatMap(KafkaSASLWire.plainCredentials)
            let accepted = credentials?.username == user.username && credentials?.password == user.password
            if accepted {
                state = .authenticated
                return .answer(
                    KafkaSASLWire.authenticateResponse(
                        correlation: header.correlation, version: header.version, error: 0, message: nil))
            }
            // The user is named, the password never.
            let who = credentials.map { "user \"\($0.username)\"" } ?? "malformed PLAIN credentials"
            return .answerAndClose(
                KafkaSASLWire.authenticateResponse(
                    correlation: header.correlation, version: header.version,
                    error: KafkaSASLWire.authenticationFailed,
                    message: "Authentication failed: invalid username or password (\(who))"))
        case (.opening, _) where admitsPlainClients:
            state = .plain
            return .forward
        default:
            return .refuse
        }
    }
}
