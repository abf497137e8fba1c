internal import COpenSSL
import Foundation

/// An OpenSSL `X509` certificate; freed in `deinit`, reached only through `withPointer`.
final class OpenSSLCertificate {
    private let pointer: OpaquePointer

    /// Takes ownership of an `X509` reference.
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        X509_free(pointer)
    }

    func withPointer<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        try body(pointer)
    }

    /// Every certificate in a PEM blob, leaf first.
    static func readAll(pem: [UInt8]) throws -> [OpenSSLCertificate] {
        let certificates = try withMemoryBIO(pem) { bio -> [OpenSSLCertificate] in
            var certificates: [OpenSSLCertificate] = []
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(OpenSSLCertificate(taking: certificate))
            }
            return certificates
        }
        // Reading stops with a "no start line" error at the end of the blob: expected, not a failure.
        let stack = OpenSSLError.drainErrorStack()
        guard !certificates.isEmpty else {
            throw OpenSSLError(.certificateUnreadable, "no PEM certificate found", stack: stack)
        }
        return certificates
    }

    /// When the certificate starts and stops being valid (its `notBefore` and `notAfter`), or `nil`
    /// when either cannot be read.
    /// `notBefore` and `notAfter` as written, even when the first is after the second.
    var dates: (notBefore: Date?, notAfter: Date?) {
        (X509_get0_notBefore(pointer).flatMap(Self.date), X509_get0_notAfter(pointer).flatMap(Self.date))
    }

    var validity: ClosedRange<Date>? {
        guard let start = X509_get0_notBefore(pointer).flatMap(Self.date),
            let end = X509_get0_notAfter(pointer).flatMap(Self.date), start <= end
        else { return nil }
        return start...end
    }

    /// An `ASN1_TIME` (UTCTime or GeneralizedTime, always UTC in a certificate) as a date.
    private static func date(_ time: UnsafePointer<ASN1_TIME>) -> Date? {
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }

    /// The subject's common name, for logs and errors (certificates carry no secret).
    var commonName: String? {
        guard let name = X509_get_subject_name(pointer) else { return nil }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = X509_NAME_get_text_by_NID(name, NID_commonName, &buffer, Int32(buffer.count))
        guard length > 0 else { return nil }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A TLS client identity: the certificate, its private key and any intermediate certificates.
final class OpenSSLClientIdentity {
    let certificate: OpenSSLCertificate
    let key: OpenSSLPrivateKey
    let chain: [OpenSSLCertificate]

    init(certificate: OpenSSLCertificate, key: OpenSSLPrivateKey, chain: [OpenSSLCertificate]) {
        self.certificate = certificate
        self.key = key
        self.chain = chain
    }

    /// A PEM certificate (optionally followed by its chain) and a PEM private key, encrypted when
    /// `password` is given.
    convenience init(certificatePEM: [UInt8], keyPEM: [UInt8], password: String? = nil) throws {
        let certificates = try OpenSSLCertificate.readAll(pem: certificatePEM)
        let key = try OpenSSLPrivateKey(pem: keyPEM, password: password)
        self.init(certificate: certificates[0], key: key, chain: Array(certificates.dropFirst()))
        try checkKeyMatches()
    }

    /// A PKCS#12 (`.p12`) bundle as Keychain Access exports Apple's push certificates.
    convenience init(pkcs12: [UInt8], password: String) throws {
        let parts = try withMemoryBIO(pkcs12) { bio -> (OpaquePointer, OpaquePointer, [OpenSSLCertificate]) in
            guard let bundle = d2i_PKCS12_bio(bio, nil) else {
                throw OpenSSLError(.pkcs12Unreadable, "not a DER PKCS#12 file")
            }
            defer { PKCS12_free(bundle) }
            var key: OpaquePointer?
            var certificate: OpaquePointer?
            var extra: OpaquePointer?
            guard PKCS12_parse(bundle, password, &key, &certificate, &extra) == 1, let key, let certificate else {
                throw OpenSSLError(.pkcs12Unreadable, "PKCS#12 did not open (wrong password or no key/certificate)")
            }
            var chain: [OpenSSLCertificate] = []
            if let extra {
                // OPENSSL_sk_* are the functions behind the sk_X509_* macros.
                for index in 0..<OPENSSL_sk_num(extra) {
                    if let item = OPENSSL_sk_value(extra, index) {
                        let x509 = OpaquePointer(item)
                        X509_up_ref(x509)
                        chain.append(OpenSSLCertificate(taking: x509))
                    }
                }
                OPENSSL_sk_pop_free(extra, freeX509)
            }
            return (key, certificate, chain)
        }
        self.init(
            certificate: OpenSSLCertificate(taking: parts.1), key: OpenSSLPrivateKey(taking: parts.0), chain: parts.2)
        try checkKeyMatches()
    }

    private func checkKeyMatches() throws {
        let matches = certificate.withPointer { cert in key.withPointer { X509_check_private_key(cert, $0) } }
        guard matches == 1 else {
            throw OpenSSLError(.certificateUnreadable, "the private key does not belong to the certificate")
        }
    }
}

/// `OPENSSL_sk_freefunc` for a stack of X509.
private func freeX509(_ item: UnsafeMutableRawPointer?) {
    X509_free(OpaquePointer(item))
}
