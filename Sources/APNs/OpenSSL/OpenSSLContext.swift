internal import COpenSSL

/// An OpenSSL `SSL_CTX` configured for APNs: TLS 1.2 or later, ALPN `h2`, peer verification on,
/// trust from the system store or a CA file, an optional client certificate.
///
/// One context serves every connection of a pool; each `OpenSSLConnection` keeps it alive
/// (`SSL_new` takes its own reference too). Configuration happens once in `init`; afterwards the
/// context is only read, which OpenSSL allows from any thread.
final class OpenSSLContext: @unchecked Sendable {
    // @unchecked Sendable: the SSL_CTX is fully configured in init and never mutated afterwards;
    // OpenSSL documents SSL_new on a shared, unchanging SSL_CTX as thread-safe.
    private let pointer: OpaquePointer

    init(trust: APNsTLSConfiguration.Trust, identity: OpenSSLClientIdentity?) throws {
        guard let method = TLS_client_method(), let context = SSL_CTX_new(method) else {
            throw OpenSSLError(.allocationFailed, "SSL_CTX_new failed")
        }
        self.pointer = context
        guard apns_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1 else {
            throw OpenSSLError(.contextSetupFailed, "cannot require TLS 1.2")
        }
        // The wire format "\x02h2": a length-prefixed list with the one protocol APNs speaks.
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {
            throw OpenSSLError(.contextSetupFailed, "cannot set ALPN")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        switch trust {
        case .system:
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw OpenSSLError(.contextSetupFailed, "cannot load the system trust store")
            }
        case .caFile(let path):
            guard SSL_CTX_load_verify_locations(context, path, nil) == 1 else {
                throw OpenSSLError(.caFileUnreadable, "cannot load CA file \(path)")
            }
        case .systemAnd(let path):
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw OpenSSLError(.contextSetupFailed, "cannot load the system trust store")
            }
            guard SSL_CTX_load_verify_locations(context, path, nil) == 1 else {
                throw OpenSSLError(.caFileUnreadable, "cannot load CA file \(path)")
            }
        }
        if let identity {
            let ok =
                identity.certificate.withPointer { SSL_CTX_use_certificate(context, $0) } == 1
                && identity.key.withPointer { SSL_CTX_use_PrivateKey(context, $0) } == 1
            guard ok else { throw OpenSSLError(.contextSetupFailed, "cannot use the client certificate") }
            for certificate in identity.chain {
                // "add1": the context takes its own reference.
                let added = certificate.withPointer { apns_SSL_CTX_add1_chain_cert(context, $0) }
                guard added == 1 else { throw OpenSSLError(.contextSetupFailed, "cannot add a chain certificate") }
            }
        }
    }

    deinit {
        SSL_CTX_free(pointer)
    }

    func withPointer<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        try body(pointer)
    }
}

/// TLS settings of a pool. APNs needs nothing else: the protocol floor and ALPN are fixed.
public struct APNsTLSConfiguration: Sendable, Hashable {
    /// Where the server's certificate chain is verified against.
    public enum Trust: Sendable, Hashable {
        /// The operating system's store (Debian: `/etc/ssl/certs`), as for Apple's real servers.
        case system
        /// A PEM file of trusted roots and nothing else, e.g. the simulator's CA.
        case caFile(String)
        /// The system's store plus the roots of a PEM file (a TLS-inspecting egress proxy's CA, the
        /// simulator's): what `apns.caFile` means in the worker's configuration.
        case systemAnd(caFile: String)
    }

    public var trust: Trust
    /// The name checked against the server certificate and sent as SNI; defaults to the host connected to.
    public var serverName: String?

    public init(trust: Trust = .system, serverName: String? = nil) {
        self.trust = trust
        self.serverName = serverName
    }
}
