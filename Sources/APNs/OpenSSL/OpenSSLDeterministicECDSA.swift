internal import COpenSSL

/// ES256 with the nonce of RFC 6979 (deterministic ECDSA, HMAC-SHA-256): one key and one message give
/// one signature, the same bytes on every machine. A fleet of workers signing the same claims (the
/// same `iat`) therefore sends APNs one token, not one per pod. OpenSSL signs deterministically only
/// from 3.2 on (Debian 12 has 3.0), so the nonce is derived here and the signature made from OpenSSL's
/// big-number and curve arithmetic: one code path on every OpenSSL 3.
///
/// The nonce depends on the private key and the message only: no secret leaks through a poor random
/// source, and signing one message twice reveals nothing (the same nonce gives the same signature).
extension OpenSSLPrivateKey {
    /// r || s, 32 bytes each: the JOSE form of an ES256 signature of SHA-256(`message`).
    func signES256Deterministic(_ message: [UInt8]) throws -> [UInt8] {
        let digest = OpenSSLDigest.sha256(message)
        return try withPointer { key in try DeterministicECDSA(key: key).sign(digest: digest) }
    }
}

/// The arithmetic of one deterministic signature on P-256; every BIGNUM and point is freed in `deinit`.
private final class DeterministicECDSA {
    private let group: OpaquePointer
    private let context: OpaquePointer
    /// The private scalar d (cleared when freed).
    private let secret: OpaquePointer
    private var owned: [OpaquePointer] = []

    init(key: OpaquePointer) throws {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else {
            throw OpenSSLError(.allocationFailed, "EC_GROUP_new_by_curve_name failed")
        }
        self.group = group
        guard let context = BN_CTX_secure_new() else {
            EC_GROUP_free(group)
            throw OpenSSLError(.allocationFailed, "BN_CTX_secure_new failed")
        }
        self.context = context
        var secret: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key, "priv", &secret) == 1, let secret else {
            BN_CTX_free(context)
            EC_GROUP_free(group)
            ERR_clear_error()
            throw OpenSSLError(.signingFailed, "the key's private scalar cannot be read")
        }
        BN_set_flags(secret, Int32(BN_FLG_CONSTTIME))
        self.secret = secret
    }

    deinit {
        for number in owned { BN_clear_free(number) }
        BN_clear_free(secret)
        BN_CTX_free(context)
        EC_GROUP_free(group)
    }

    /// A new BIGNUM, freed with this object.
    private func number(_ bytes: [UInt8]? = nil) throws -> OpaquePointer {
        let made =
            bytes.map { bytes in bytes.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) } }
            ?? BN_new()
        guard let made else { throw OpenSSLError(.allocationFailed, "BN_new failed") }
        owned.append(made)
        return made
    }

    private func bytes(_ number: OpaquePointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        _ = BN_bn2binpad(number, &out, 32)
        return out
    }

    private func hmac(_ key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = key.withUnsafeBytes { key in
            data.withUnsafeBufferPointer { data in
                HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), data.baseAddress, data.count, &out, &length)
            }
        }
        return out
    }

    /// RFC 6979 section 3.2 for qlen = hlen = 256 (P-256, SHA-256), then the ECDSA signature with it.
    func sign(digest: [UInt8]) throws -> [UInt8] {
        guard let order = EC_GROUP_get0_order(group) else {
            throw OpenSSLError(.signingFailed, "the curve's order cannot be read")
        }
        let e = try number(digest)  // bits2int(h1): qlen = hlen, no shift
        let reduced = try number()
        guard BN_nnmod(reduced, e, order, context) == 1 else { throw OpenSSLError(.signingFailed, "BN_nnmod failed") }
        let x = bytes(secret)
        let h1 = bytes(reduced)  // bits2octets(h1)
        var v = [UInt8](repeating: 1, count: 32)
        var k = [UInt8](repeating: 0, count: 32)
        k = hmac(k, v + [0] + x + h1)
        v = hmac(k, v)
        k = hmac(k, v + [1] + x + h1)
        v = hmac(k, v)
        while true {
            v = hmac(k, v)
            if let signature = try signature(nonce: v, e: e, order: order) { return signature }
            k = hmac(k, v + [0])
            v = hmac(k, v)
        }
    }

    /// r || s for the nonce `t` (as bits2int), or nil when `t` is not in [1, n - 1] or r or s is 0
    /// (the caller derives the next candidate).
    private func signature(nonce t: [UInt8], e: OpaquePointer, order: OpaquePointer) throws -> [UInt8]? {
        let k = try number(t)
        BN_set_flags(k, Int32(BN_FLG_CONSTTIME))
        guard BN_is_zero(k) == 0, BN_cmp(k, order) < 0 else { return nil }
        guard let point = EC_POINT_new(group) else { throw OpenSSLError(.allocationFailed, "EC_POINT_new failed") }
        defer { EC_POINT_free(point) }
        let affineX = try number()
        guard EC_POINT_mul(group, point, k, nil, nil, context) == 1,
            EC_POINT_get_affine_coordinates(group, point, affineX, nil, context) == 1
        else { throw OpenSSLError(.signingFailed, "k·G failed") }
        let r = try number()
        guard BN_nnmod(r, affineX, order, context) == 1 else { throw OpenSSLError(.signingFailed, "BN_nnmod failed") }
        guard BN_is_zero(r) == 0 else { return nil }
        // s = k⁻¹ (e + r d) mod n; k⁻¹ as k^(n-2) mod n, in constant time.
        let exponent = try number()
        let two = try number([2])
        let inverse = try number()
        let product = try number()
        let sum = try number()
        let s = try number()
        guard BN_sub(exponent, order, two) == 1,
            BN_mod_exp_mont_consttime(inverse, k, exponent, order, context, nil) == 1,
            BN_mod_mul(product, r, secret, order, context) == 1,
            BN_mod_add(sum, e, product, order, context) == 1,
            BN_mod_mul(s, inverse, sum, order, context) == 1
        else { throw OpenSSLError(.signingFailed, "the signature arithmetic failed") }
        guard BN_is_zero(s) == 0 else { return nil }
        return bytes(r) + bytes(s)
    }
}
