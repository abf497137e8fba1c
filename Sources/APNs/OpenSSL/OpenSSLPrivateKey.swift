internal import COpenSSL

/// An OpenSSL `EVP_PKEY`: the `.p8` signing key of token auth, or the key of a client certificate.
///
/// One final class per C handle: the key is freed in `deinit` and only reached through
/// `withPointer`, so no pointer outlives the object.
final class OpenSSLPrivateKey {
    private let pointer: OpaquePointer

    /// Takes ownership of an `EVP_PKEY` reference.
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    /// Reads a PEM private key (PKCS#8 `BEGIN PRIVATE KEY`, as Apple's `.p8` files are, or the
    /// traditional `BEGIN EC PRIVATE KEY` / `BEGIN RSA PRIVATE KEY`), encrypted (`BEGIN ENCRYPTED
    /// PRIVATE KEY`, or a traditional key with `Proc-Type: 4,ENCRYPTED`) when `password` is given.
    /// Without a password an encrypted key is refused: a callback that refuses is installed, so
    /// OpenSSL never prompts on a terminal.
    convenience init(pem: [UInt8], password: String? = nil) throws {
        let key = try withMemoryBIO(pem) { bio -> OpaquePointer in
            let key: OpaquePointer?
            if let password {
                // No callback and `u` set: OpenSSL takes `u` as the NUL-terminated passphrase.
                key = password.withCString {
                    PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0))
                }
            } else {
                key = PEM_read_bio_PrivateKey(bio, nil, refusePassword, nil)
            }
            guard let key else {
                if Self.isEncrypted(pem) {
                    throw OpenSSLError(
                        .keyUnreadable,
                        password == nil
                            ? "the private key is encrypted and no password was given"
                            : "wrong password for the private key")
                }
                throw OpenSSLError(.keyUnreadable, "not a PEM private key")
            }
            return key
        }
        self.init(taking: key)
    }

    /// Whether PEM text holds an encrypted key (PKCS#8 `ENCRYPTED PRIVATE KEY` or an RFC 1421 header).
    static func isEncrypted(_ pem: [UInt8]) -> Bool {
        let text = String(decoding: pem, as: UTF8.self)
        return text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED")
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    func withPointer<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        try body(pointer)
    }

    /// Whether this is an elliptic-curve key on P-256 (prime256v1), the only curve ES256 allows.
    var isP256: Bool {
        guard EVP_PKEY_get_base_id(pointer) == EVP_PKEY_EC else { return false }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pointer, &name, name.count, &length) == 1 else {
            ERR_clear_error()
            return false
        }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return group == "prime256v1" || group == "P-256"
    }

    /// ES256: ECDSA over SHA-256, returned in JOSE form (r || s, 32 bytes each), not DER.
    func signES256(_ message: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else {
            throw OpenSSLError(.allocationFailed, "EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            throw OpenSSLError(.signingFailed, "EVP_DigestSignInit failed")
        }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }) == 1
        else {
            throw OpenSSLError(.signingFailed, "EVP_DigestSign (size) failed")
        }
        var der = [UInt8](repeating: 0, count: length)
        let status = message.withUnsafeBufferPointer { input in
            EVP_DigestSign(context, &der, &length, input.baseAddress, input.count)
        }
        guard status == 1 else { throw OpenSSLError(.signingFailed, "EVP_DigestSign failed") }
        return try Self.joseSignature(fromDER: Array(der.prefix(length)))
    }

    /// Converts an ECDSA-Sig-Value (DER SEQUENCE of two INTEGERs) to r || s, each left-padded to 32 bytes.
    static func joseSignature(fromDER der: [UInt8]) throws -> [UInt8] {
        try der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else {
                throw OpenSSLError(.signingFailed, "signature is not a DER ECDSA-Sig-Value")
            }
            defer { ECDSA_SIG_free(signature) }
            var out = [UInt8](repeating: 0, count: 64)
            let ok = out.withUnsafeMutableBufferPointer { out -> Bool in
                guard let r = ECDSA_SIG_get0_r(signature), let s = ECDSA_SIG_get0_s(signature) else { return false }
                return BN_bn2binpad(r, out.baseAddress, 32) == 32 && BN_bn2binpad(s, out.baseAddress! + 32, 32) == 32
            }
            guard ok else { throw OpenSSLError(.signingFailed, "r or s does not fit in 32 bytes") }
            return out
        }
    }
}

/// A `pem_password_cb` that refuses: keys must not be encrypted (and OpenSSL must never prompt).
private func refusePassword(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ rwflag: Int32, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    -1
}
