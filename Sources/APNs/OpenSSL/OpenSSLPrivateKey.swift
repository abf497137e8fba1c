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
}

/// A `pem_password_cb` that refuses: keys must not be encrypted (and OpenSSL must never prompt).
private func refusePassword(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ rwflag: Int32, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    -1
}
