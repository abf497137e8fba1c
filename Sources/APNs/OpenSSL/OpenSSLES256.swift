internal import COpenSSL

/// OpenSSL's own deterministic ECDSA (RFC 6979), offered from OpenSSL 3.2 as the signature
/// parameter `nonce-type` = 1. An OpenSSL that does not know the parameter ignores it and signs with a
/// random nonce, so it is asked first whether the parameter is settable.
enum OpenSSLNonceTypeSigner {
    /// r || s of SHA-256(`message`) with OpenSSL's deterministic nonce; `nil` when this OpenSSL
    /// does not offer one.
    static func sign(_ message: [UInt8], key: OpaquePointer) throws -> [UInt8]? {
        guard let digestContext = EVP_MD_CTX_new() else {
            throw OpenSSLError(.allocationFailed, "EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(digestContext) }
        var keyContext: OpaquePointer?
        guard EVP_DigestSignInit_ex(digestContext, &keyContext, "SHA256", nil, nil, key, nil) == 1, let keyContext
        else { throw OpenSSLError(.signingFailed, "EVP_DigestSignInit_ex failed") }
        let offered = "nonce-type".withCString { name in
            EVP_PKEY_CTX_settable_params(keyContext).map { OSSL_PARAM_locate_const($0, name) != nil } ?? false
        }
        guard offered else { return nil }
        var deterministic: UInt32 = 1
        // OSSL_PARAM keeps pointers to its key and value: both live until the call returns.
        let set = "nonce-type".withCString { name in
            var parameters = [OSSL_PARAM_construct_uint(name, &deterministic), OSSL_PARAM_construct_end()]
            return EVP_PKEY_CTX_set_params(keyContext, &parameters)
        }
        guard set == 1 else { throw OpenSSLError(.signingFailed, "the nonce-type parameter cannot be set") }
        var length = 0
        guard EVP_DigestSign(digestContext, nil, &length, message, message.count) == 1, length > 0 else {
            throw OpenSSLError(.signingFailed, "EVP_DigestSign (length) failed")
        }
        var der = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(digestContext, &der, &length, message, message.count) == 1 else {
            throw OpenSSLError(.signingFailed, "EVP_DigestSign failed")
        }
        return try ES256Verification.jose(fromDER: Array(der.prefix(length)))
    }
}

/// ES256 signatures checked with the key's public half, and moved between the JOSE form (r || s) and
/// ASN.1 DER (what OpenSSL signs and verifies).
enum ES256Verification {
    /// Whether `signature` (r || s) is a valid ES256 signature of `message` under `key`'s public key.
    static func verifies(_ signature: [UInt8], message: [UInt8], key: OpaquePointer) throws -> Bool {
        let der = try derFromJOSE(signature)
        guard let digestContext = EVP_MD_CTX_new() else {
            throw OpenSSLError(.allocationFailed, "EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(digestContext) }
        guard EVP_DigestVerifyInit(digestContext, nil, EVP_sha256(), nil, key) == 1 else {
            throw OpenSSLError(.signingFailed, "EVP_DigestVerifyInit failed")
        }
        let verdict = EVP_DigestVerify(digestContext, der, der.count, message, message.count)
        // 1: valid; 0: invalid; below 0: an error (a malformed signature among them). Only 1 passes.
        _ = OpenSSLError.drainErrorStack()
        return verdict == 1
    }

    /// The DER `ECDSA-Sig-Value` of r || s.
    static func derFromJOSE(_ signature: [UInt8]) throws -> [UInt8] {
        guard signature.count == 64 else { throw OpenSSLError(.signatureUnverified, "an ES256 signature is 64 bytes") }
        guard let value = ECDSA_SIG_new() else { throw OpenSSLError(.allocationFailed, "ECDSA_SIG_new failed") }
        defer { ECDSA_SIG_free(value) }
        let r = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(value, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            throw OpenSSLError(.allocationFailed, "ECDSA_SIG_set0 failed")
        }
        let length = i2d_ECDSA_SIG(value, nil)
        guard length > 0 else { throw OpenSSLError(.signingFailed, "i2d_ECDSA_SIG failed") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_ECDSA_SIG(value, &cursor)
        }
        guard written == length else { throw OpenSSLError(.signingFailed, "i2d_ECDSA_SIG failed") }
        return der
    }

    /// r || s of a DER `ECDSA-Sig-Value`.
    static func jose(fromDER der: [UInt8]) throws -> [UInt8] {
        let value = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let value else { throw OpenSSLError(.signingFailed, "d2i_ECDSA_SIG failed") }
        defer { ECDSA_SIG_free(value) }
        guard let r = ECDSA_SIG_get0_r(value), let s = ECDSA_SIG_get0_s(value) else {
            throw OpenSSLError(.signingFailed, "the signature has no r or s")
        }
        var out = [UInt8](repeating: 0, count: 64)
        let written = out.withUnsafeMutableBufferPointer { buffer in
            (BN_bn2binpad(r, buffer.baseAddress, 32), BN_bn2binpad(s, buffer.baseAddress! + 32, 32))
        }
        guard written == (32, 32) else { throw OpenSSLError(.signingFailed, "r or s is wider than 32 bytes") }
        return out
    }
}

extension OpenSSLPrivateKey {
    /// A new P-256 key (for the choice of signer, and for tests).
    static func generateP256() throws -> OpenSSLPrivateKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw OpenSSLError(.allocationFailed, "EVP_PKEY_CTX_new_from_name(EC) failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
            EVP_PKEY_generate(context, &key) == 1, let key
        else { throw OpenSSLError(.signingFailed, "a P-256 key cannot be generated") }
        return OpenSSLPrivateKey(taking: key)
    }
}
