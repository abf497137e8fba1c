internal import COpenSSL

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `.p8` key Apple issues for token authentication: an ECDSA P-256 private key in PKCS#8 PEM.
public final class APNsSigningKey: @unchecked Sendable {
    // @unchecked Sendable: the EVP_PKEY is immutable after loading, and each signature makes its own
    // contexts (HMAC, big numbers, digest), so signatures on several threads share no mutable state.
    let key: OpenSSLPrivateKey
    /// How the key signs a message: ES256 with RFC 6979's nonce, verified before it is returned. A
    /// seam: tests put a signer that fails in its place.
    private let sign: @Sendable (OpenSSLPrivateKey, [UInt8]) throws -> [UInt8]

    /// Reads the PEM text of a `.p8` file. Refuses any key that is not on P-256.
    public convenience init(pem: [UInt8]) throws(APNsCredentialError) {
        try self.init(pem: pem, signing: { key, message in try key.signES256Deterministic(message) })
    }

    /// For tests: the key signs through `sign`.
    init(pem: [UInt8], signing sign: @escaping @Sendable (OpenSSLPrivateKey, [UInt8]) throws -> [UInt8])
        throws(APNsCredentialError)
    {
        self.sign = sign
        // What a wrong file most often is, said in words rather than as OpenSSL's decoder error.
        let text = String(decoding: pem.prefix(4096), as: UTF8.self)
        if text.contains("-----BEGIN PUBLIC KEY-----") {
            throw APNsCredentialError(
                .keyUnreadable,
                "the token key is a public key (BEGIN PUBLIC KEY): give the private key Apple issued, the .p8 file (BEGIN PRIVATE KEY)"
            )
        }
        if text.contains("-----BEGIN CERTIFICATE-----") {
            throw APNsCredentialError(
                .keyUnreadable,
                "the token key is a certificate (BEGIN CERTIFICATE): token authentication takes the .p8 private key; a certificate goes under certificate:"
            )
        }
        do {
            self.key = try OpenSSLPrivateKey(pem: pem)
        } catch let error as OpenSSLError {
            throw APNsCredentialError(.keyUnreadable, "the token key is not a PEM private key", openSSL: error)
        } catch {
            throw APNsCredentialError(.keyUnreadable, "\(error)")
        }
        guard key.isP256 else {
            throw APNsCredentialError(.keyUnreadable, "the token key is not an elliptic-curve key on P-256 (ES256)")
        }
    }

    /// Reads a `.p8` file.
    public convenience init(file path: String) throws(APNsCredentialError) {
        try self.init(pem: try readFile(path))
    }

    /// Whether `other` is the same key: the same public key, whatever the PEM text it was read from
    /// (PKCS#8 or SEC 1, other line breaks).
    public func isSameKey(as other: APNsSigningKey) -> Bool {
        key.withPointer { mine in other.key.withPointer { theirs in EVP_PKEY_eq(mine, theirs) == 1 } }
    }

    /// ES256 signature in JOSE form (r || s), deterministic (RFC 6979): the same bytes for the same
    /// message wherever it is signed.
    func signDeterministic(_ message: [UInt8]) throws(APNsCredentialError) -> [UInt8] {
        do {
            return try sign(key, message)
        } catch let error as OpenSSLError where error.code == .signatureUnverified {
            throw APNsCredentialError(
                .signingFailed, "the ES256 signature made did not verify with the key's public key, and was not used",
                openSSL: error)
        } catch let error as OpenSSLError {
            throw APNsCredentialError(.signingFailed, "ES256 signing failed", openSSL: error)
        } catch {
            throw APNsCredentialError(.signingFailed, "\(error)")
        }
    }
}

/// Reads a whole key or certificate file, with the system's reason when it cannot (missing, not
/// readable by this user, a directory).
public func readCredentialFile(_ path: String) throws(APNsCredentialError) -> [UInt8] {
    try readFile(path)
}

/// A file that could not be read: `reason` in the system's words ("No such file or directory"),
/// and whether it could not even be opened.
public struct FileReadFailure: Error, Sendable {
    public let reason: String
    public let errno: Int32
    public let opening: Bool
}

/// Reads a whole file (keys, certificates and event files are small).
public func readWholeFile(_ path: String) throws(FileReadFailure) -> [UInt8] {
    guard let file = fopen(path, "rb") else {
        let code = errno  // before anything else may set it
        throw FileReadFailure(reason: String(cString: strerror(code)), errno: code, opening: true)
    }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16_384)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count > 0 { bytes.append(contentsOf: chunk.prefix(count)) }
        if count < chunk.count { break }
    }
    // A directory opens, then fails to read (EISDIR).
    guard ferror(file) == 0 else {
        let code = errno
        throw FileReadFailure(reason: String(cString: strerror(code)), errno: code, opening: false)
    }
    return bytes
}

/// A whole key or certificate file, its failure said as a credential error naming the file.
func readFile(_ path: String) throws(APNsCredentialError) -> [UInt8] {
    do {
        return try readWholeFile(path)
    } catch {
        // A permission refused names the user refused: the file is often owned by another (a
        // mounted Secret's mode and fsGroup).
        let user = error.errno == EACCES ? " (to user id \(getuid()))" : ""
        throw APNsCredentialError(
            .fileUnreadable, "cannot \(error.opening ? "open" : "read") \(path): \(error.reason)\(user)")
    }
}
