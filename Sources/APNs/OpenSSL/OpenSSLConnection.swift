internal import COpenSSL

#if canImport(Glibc)
    import Glibc
#endif

/// One TLS session (`SSL`) whose network side is two memory BIOs: bytes from the socket are written
/// into `readBIO`, bytes for the socket are read out of `writeBIO`. No file descriptor is ever given to
/// OpenSSL; SwiftNIO owns the socket.
///
/// Not thread-safe: used only from the channel's event loop by `APNsTLSHandler`.
final class OpenSSLConnection {
    private let ssl: OpaquePointer
    /// Owned by `ssl` after `SSL_set_bio`; kept here only to feed and drain them.
    private let readBIO: OpaquePointer
    private let writeBIO: OpaquePointer
    /// Keeps the context alive as long as the session (SSL_new also takes a reference).
    private let context: OpenSSLContext

    /// The outcome of a step that may need more bytes from the peer.
    enum Step: Equatable {
        case done
        case wantRead
        case closed
        case failed(OpenSSLHandshakeFailure)
    }

    init(context: OpenSSLContext, serverName: String) throws {
        guard let ssl = context.withPointer({ SSL_new($0) }) else {
            throw OpenSSLError(.allocationFailed, "SSL_new failed")
        }
        guard let readBIO = BIO_new(BIO_s_mem()), let writeBIO = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw OpenSSLError(.allocationFailed, "BIO_new failed")
        }
        // An empty memory BIO must say "retry later", not "end of file".
        apns_BIO_set_mem_eof_return(readBIO, -1)
        apns_BIO_set_mem_eof_return(writeBIO, -1)
        SSL_set_bio(ssl, readBIO, writeBIO)
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        self.context = context
        SSL_set_connect_state(ssl)
        // An IP address is checked against the certificate's IP SANs and never sent as SNI (RFC 6066).
        if Self.isIPAddress(serverName) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else {
                throw OpenSSLError(.contextSetupFailed, "cannot set the server address \(serverName)")
            }
            return
        }
        // SNI and host name verification.
        let sni = serverName.withCString { apns_SSL_set_tlsext_host_name(ssl, $0) }
        guard sni == 1, SSL_set1_host(ssl, serverName) == 1 else {
            throw OpenSSLError(.contextSetupFailed, "cannot set the server name \(serverName)")
        }
    }

    private static func isIPAddress(_ text: String) -> Bool {
        var storage = in6_addr()
        return inet_pton(AF_INET, text, &storage) == 1 || inet_pton(AF_INET6, text, &storage) == 1
    }

    deinit {
        SSL_free(ssl)  // also frees both BIOs
    }

    /// Feeds bytes received from the socket.
    func receive(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        _ = BIO_write(readBIO, bytes.baseAddress, Int32(bytes.count))
    }

    /// How many bytes OpenSSL wants on the socket.
    var pendingOutputCount: Int { Int(BIO_ctrl_pending(writeBIO)) }

    /// Moves up to `buffer.count` bytes meant for the socket into `buffer`; returns the count.
    func readOutput(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let read = BIO_read(writeBIO, buffer.baseAddress, Int32(buffer.count))
        return max(0, Int(read))
    }

    // Each call below starts with ERR_clear_error(): SSL_get_error reads the thread's error queue,
    // and an event-loop thread also signs JWTs and loads keys, whose leftovers would otherwise turn
    // a harmless WANT_READ into a failure (OpenSSL's documented requirement for SSL_get_error).

    func handshake() -> Step {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        return classify(result)
    }

    /// The protocol the server chose with ALPN, if any.
    var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The negotiated protocol version, e.g. "TLSv1.3".
    var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// Decrypts what is available into `buffer`: the byte count (> 0), or the step that stopped it.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, stop: Step) {
        ERR_clear_error()
        let result = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
        if result > 0 { return (Int(result), .done) }
        return (0, classify(result))
    }

    /// Encrypts all of `bytes` (memory BIOs never block, so SSL_write takes everything).
    func write(_ bytes: UnsafeRawBufferPointer) -> Step {
        guard bytes.count > 0 else { return .done }
        ERR_clear_error()
        let result = SSL_write(ssl, bytes.baseAddress, Int32(bytes.count))
        return result > 0 ? .done : classify(result)
    }

    /// Queues a close_notify alert.
    func shutdown() {
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    private func classify(_ result: Int32) -> Step {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .wantRead
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        default:
            let verify = SSL_get_verify_result(ssl)
            let stack = OpenSSLError.drainErrorStack()
            if verify != X509_V_OK {
                let reason = String(cString: X509_verify_cert_error_string(verify))
                return .failed(OpenSSLHandshakeFailure(verifyCode: Int(verify), verifyReason: reason, stack: stack))
            }
            return .failed(OpenSSLHandshakeFailure(verifyCode: nil, verifyReason: nil, stack: stack))
        }
    }
}

/// Why a handshake or a record failed: the certificate verification result when that was the
/// cause, and OpenSSL's error queue.
struct OpenSSLHandshakeFailure: Hashable, Sendable {
    var verifyCode: Int?
    var verifyReason: String?
    var stack: [String]
}
