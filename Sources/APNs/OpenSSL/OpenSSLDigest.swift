internal import COpenSSL

/// SHA-256 through OpenSSL's one-shot `EVP_Digest`.
enum OpenSSLDigest {
    static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let input = Array(bytes)
        let ok = input.withUnsafeBytes { raw in
            EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_sha256(), nil) == 1
        }
        precondition(ok, "SHA-256 cannot fail on a buffer in memory")
        return Array(digest.prefix(Int(length)))
    }
}
