import Foundation

/// A provider certificate and its key, for certificate-based authentication (TLS client certificate).
public final class APNsCertificateIdentity: @unchecked Sendable {
    // @unchecked Sendable: the certificate and key are immutable after loading and only read when a
    // pool builds its SSL_CTX.
    let identity: OpenSSLClientIdentity

    /// A PEM certificate (optionally followed by intermediates) and its PEM private key; `password`
    /// opens an encrypted key (`nil`: the key must not be encrypted).
    public init(certificatePEM: [UInt8], keyPEM: [UInt8], password: String? = nil) throws(APNsCredentialError) {
        do {
            self.identity = try OpenSSLClientIdentity(
                certificatePEM: certificatePEM, keyPEM: keyPEM, password: password)
            self.validity = identity.certificate.validity
        } catch let error as OpenSSLError where Self.mismatched(error) {
            throw APNsCredentialError(
                .keyDoesNotMatchCertificate,
                "the private key is not the certificate's (they do not match): give the key the certificate was issued for"
            )
        } catch let error as OpenSSLError {
            throw APNsCredentialError(.certificateUnreadable, "cannot load the certificate or its key", openSSL: error)
        } catch {
            throw APNsCredentialError(.certificateUnreadable, "\(error)")
        }
        try checkDates()
    }

    /// A PKCS#12 bundle (`.p12`) with its password.
    public init(pkcs12: [UInt8], password: String) throws(APNsCredentialError) {
        do {
            self.identity = try OpenSSLClientIdentity(pkcs12: pkcs12, password: password)
            self.validity = identity.certificate.validity
        } catch let error as OpenSSLError {
            throw APNsCredentialError(.certificateUnreadable, "cannot open the PKCS#12 bundle", openSSL: error)
        } catch {
            throw APNsCredentialError(.certificateUnreadable, "\(error)")
        }
        try checkDates()
    }

    /// OpenSSL's reason when a key is loaded beside a certificate it does not belong to.
    static func mismatched(_ error: OpenSSLError) -> Bool {
        "\(error)".contains("key values mismatch")
    }

    /// A certificate whose `notBefore` is after its `notAfter` is never valid: refused at load.
    func checkDates() throws(APNsCredentialError) {
        let (notBefore, notAfter) = identity.certificate.dates
        guard let notBefore, let notAfter, notBefore > notAfter else { return }
        throw APNsCredentialError(
            .certificateUnreadable,
            "the certificate is never valid: its notBefore (\(notBefore.formatted(.iso8601))) is after its notAfter (\(notAfter.formatted(.iso8601)))"
        )
    }

    public convenience init(certificateFile: String, keyFile: String, password: String? = nil)
        throws(APNsCredentialError)
    {
        try self.init(certificatePEM: try readFile(certificateFile), keyPEM: try readFile(keyFile), password: password)
    }

    public convenience init(pkcs12File: String, password: String) throws(APNsCredentialError) {
        try self.init(pkcs12: try readFile(pkcs12File), password: password)
    }

    /// The certificate's common name (Apple's read "Apple Push Services: <bundle id>").
    public var commonName: String? { identity.certificate.commonName }

    /// When the certificate starts and stops being valid (`notBefore`...`notAfter`); `nil` when the
    /// certificate's dates cannot be read. Apple's push certificates are valid for a year.
    public let validity: ClosedRange<Date>?

    /// Throws `certificateExpired` or `certificateNotYetValid` when `date` is outside the
    /// certificate's validity: APNs refuses the TLS handshake then, so nothing can be sent with it.
    public func checkValid(at date: Date) throws(APNsCredentialError) {
        guard let validity else { return }
        if date > validity.upperBound {
            throw APNsCredentialError(
                .certificateExpired,
                "the certificate expired on \(validity.upperBound.formatted(.iso8601)): renew it in Apple's developer account"
            )
        }
        if date < validity.lowerBound {
            throw APNsCredentialError(
                .certificateNotYetValid,
                "the certificate is not valid before \(validity.lowerBound.formatted(.iso8601)) (or this machine's clock is wrong)"
            )
        }
    }
}
