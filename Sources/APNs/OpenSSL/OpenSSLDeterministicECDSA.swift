internal import COpenSSL

/// ES256 with a deterministic nonce (RFC 6979, HMAC-SHA-256): one key and one message give one
/// signature, the same bytes on every machine. A fleet of workers signing the same claims (the same
/// `iat`) therefore sends APNs one token, not one per pod.
///
/// Two implementations give the same bytes. Where the linked OpenSSL derives the nonce itself
/// (3.2 and later: the `nonce-type` signature parameter), its signer is used: its arithmetic on the
/// private key is OpenSSL's own fixed-width code. Elsewhere (Debian 12 has 3.0) `RFC6979Signer`
/// derives the nonce and computes the signature blinded. Which one a process uses is chosen once,
/// by signing with both on a key made then (`DeterministicES256.implementation`).
///
/// Every signature is verified with the key's public half before it leaves here: a signature made
/// wrong (a fault, a bug) next to a right one for the same message gives the private key away, so a
/// signature that does not verify is an error and never a token.
extension OpenSSLPrivateKey {
    /// r || s, 32 bytes each: the JOSE form of an ES256 signature of SHA-256(`message`).
    func signES256Deterministic(_ message: [UInt8]) throws -> [UInt8] {
        try signES256Deterministic(message, implementation: DeterministicES256.implementation)
    }

    /// - Parameters:
    ///   - mac: the HMAC of RFC 6979's nonce (`nil`: OpenSSL's); a seam for tests.
    ///   - tamper: changes the signature before it is verified; a seam for tests.
    func signES256Deterministic(
        _ message: [UInt8], implementation: DeterministicES256.Implementation, mac: (any NonceMAC)? = nil,
        tamper: ((inout [UInt8]) -> Void)? = nil
    ) throws -> [UInt8] {
        var signature = try withPointer { key -> [UInt8] in
            switch implementation {
            case .openSSL:
                guard let signature = try OpenSSLNonceTypeSigner.sign(message, key: key) else {
                    throw OpenSSLError(.signingFailed, "this OpenSSL does not sign with a deterministic nonce")
                }
                return signature
            case .rfc6979:
                let signer = try RFC6979Signer(key: key, mac: try mac ?? OpenSSLHMACSHA256())
                return try signer.sign(digest: OpenSSLDigest.sha256(message))
            }
        }
        tamper?(&signature)
        guard try withPointer({ try ES256Verification.verifies(signature, message: message, key: $0) }) else {
            throw OpenSSLError(
                .signatureUnverified, "the ES256 signature made does not verify with the key's public key: not used")
        }
        return signature
    }
}

/// Which deterministic signer this process uses.
enum DeterministicES256 {
    enum Implementation: String, Sendable {
        /// OpenSSL's own (3.2 and later).
        case openSSL
        /// `RFC6979Signer`.
        case rfc6979
    }

    /// OpenSSL's signer where the linked OpenSSL offers deterministic nonces and signs the same bytes
    /// as `RFC6979Signer` on a key made for the comparison; otherwise `RFC6979Signer`. Decided once.
    static let implementation: Implementation = {
        guard let key = try? OpenSSLPrivateKey.generateP256() else { return .rfc6979 }
        let message = Array("apns-worker: which deterministic ECDSA".utf8)
        guard let theirs = try? key.signES256Deterministic(message, implementation: .openSSL),
            let ours = try? key.signES256Deterministic(message, implementation: .rfc6979), theirs == ours
        else { return .rfc6979 }
        return .openSSL
    }()
}

/// RFC 6979 section 3.2 for P-256 with SHA-256 (qlen = hlen = 256), then the ECDSA signature with
/// the nonce, computed so that neither the private scalar nor the nonce meets variable-time
/// arithmetic unblinded: with a random b, s = (k·b)⁻¹ · (b·e + b·r·d) mod n, every product a
/// Montgomery multiplication of fixed-width operands, the inverse a constant-time exponentiation.
/// (`BN_FLG_CONSTTIME` alone does not make `BN_mod_mul` constant-time: its division's correction loop
/// depends on the values, the leak behind CVE-2018-0495.) The secrets' bytes live in `SecretBytes`,
/// their big numbers in OpenSSL's secure allocations, cleared when freed.
final class RFC6979Signer {
    /// Candidates tried before giving up. A candidate is refused when it is not below the curve's
    /// order (or r or s comes out 0): about one in 2³² for P-256, so a second is all but never
    /// needed, and a MAC that keeps producing refused candidates is a fault, not a reason to loop.
    static let candidateLimit = 8

    private let group: OpaquePointer
    private let context: OpaquePointer
    private let montgomery: OpaquePointer
    /// The private scalar d.
    private let secret: OpaquePointer
    private let mac: any NonceMAC
    private var owned: [OpaquePointer] = []

    init(key: OpaquePointer, mac: any NonceMAC) throws {
        self.mac = mac
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else {
            throw OpenSSLError(.allocationFailed, "EC_GROUP_new_by_curve_name failed")
        }
        guard let context = BN_CTX_secure_new() else {
            EC_GROUP_free(group)
            throw OpenSSLError(.allocationFailed, "BN_CTX_secure_new failed")
        }
        guard let montgomery = BN_MONT_CTX_new() else {
            BN_CTX_free(context)
            EC_GROUP_free(group)
            throw OpenSSLError(.allocationFailed, "BN_MONT_CTX_new failed")
        }
        var secret: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key, "priv", &secret) == 1, let secret else {
            BN_MONT_CTX_free(montgomery)
            BN_CTX_free(context)
            EC_GROUP_free(group)
            throw OpenSSLError(.signingFailed, "the key's private scalar cannot be read")
        }
        BN_set_flags(secret, Int32(BN_FLG_CONSTTIME))
        self.group = group
        self.context = context
        self.montgomery = montgomery
        self.secret = secret
        guard let order = EC_GROUP_get0_order(group), BN_MONT_CTX_set(montgomery, order, context) == 1 else {
            throw OpenSSLError(.signingFailed, "the curve's order cannot be set up")
        }
        guard BN_is_negative(secret) == 0, BN_cmp(secret, order) < 0 else {
            throw OpenSSLError(.signingFailed, "the key's private scalar is not below the curve's order")
        }
    }

    deinit {
        for number in owned { BN_clear_free(number) }
        BN_clear_free(secret)
        BN_MONT_CTX_free(montgomery)
        BN_CTX_free(context)
        EC_GROUP_free(group)
    }

    /// A new big number (in OpenSSL's secure heap where it has one), flagged constant-time, cleared
    /// and freed with this object.
    private func number() throws -> OpaquePointer {
        guard let made = BN_secure_new() else { throw OpenSSLError(.allocationFailed, "BN_secure_new failed") }
        owned.append(made)
        BN_set_flags(made, Int32(BN_FLG_CONSTTIME))
        return made
    }

    private func number(_ bytes: UnsafePointer<UInt8>, _ count: Int) throws -> OpaquePointer {
        let made = try number()
        guard BN_bin2bn(bytes, Int32(count), made) != nil else {
            throw OpenSSLError(.signingFailed, "BN_bin2bn failed")
        }
        return made
    }

    /// `number`'s 32 big-endian bytes.
    private func bytes(_ number: OpaquePointer) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        guard BN_bn2binpad(number, &out, 32) == 32 else { throw OpenSSLError(.signingFailed, "BN_bn2binpad failed") }
        return out
    }

    /// The signature of `digest` (SHA-256 of the message): RFC 6979's HMAC_DRBG, its candidates tried
    /// in turn.
    func sign(digest: [UInt8]) throws -> [UInt8] {
        guard digest.count == 32, let order = EC_GROUP_get0_order(group) else {
            throw OpenSSLError(.signingFailed, "ES256 signs a 32-byte SHA-256 digest")
        }
        // bits2int(h1) (qlen = hlen: no shift), reduced: bits2octets(h1), and e of the signature.
        let h = try digest.withUnsafeBufferPointer { try number($0.baseAddress!, 32) }
        let e = try number()
        guard BN_nnmod(e, h, order, context) == 1 else { throw OpenSSLError(.signingFailed, "BN_nnmod failed") }
        let h1 = try bytes(e)
        let x = SecretBytes(count: 32)  // int2octets(x)
        guard x.withMutableBytes({ BN_bn2binpad(secret, $0, Int32($1)) }) == 32 else {
            throw OpenSSLError(.signingFailed, "the private scalar's octets cannot be written")
        }
        let v = SecretBytes(count: 32, repeating: 0x01)
        let k = SecretBytes(count: 32, repeating: 0x00)
        try mac.authenticate(key: k, [.secret(v), .byte(0x00), .secret(x), .bytes(h1)], into: k)  // d
        try mac.authenticate(key: k, [.secret(v)], into: v)  // e
        try mac.authenticate(key: k, [.secret(v), .byte(0x01), .secret(x), .bytes(h1)], into: k)  // f
        try mac.authenticate(key: k, [.secret(v)], into: v)  // g
        for _ in 0..<Self.candidateLimit {
            try mac.authenticate(key: k, [.secret(v)], into: v)  // h.2: T = V (tlen = qlen)
            if let signature = try signature(nonce: v, e: e, order: order) { return signature }
            try mac.authenticate(key: k, [.secret(v), .byte(0x00)], into: k)  // h.3
            try mac.authenticate(key: k, [.secret(v)], into: v)
        }
        throw OpenSSLError(.signingFailed, "no usable nonce in \(Self.candidateLimit) candidates")
    }

    /// a·b mod n, both below n, by two Montgomery multiplications (a into Montgomery form, then the
    /// product with b leaves it).
    private func multiply(_ a: OpaquePointer, _ b: OpaquePointer) throws -> OpaquePointer {
        let aR = try number()
        let product = try number()
        guard BN_to_montgomery(aR, a, montgomery, context) == 1,
            BN_mod_mul_montgomery(product, aR, b, montgomery, context) == 1
        else { throw OpenSSLError(.signingFailed, "a Montgomery multiplication failed") }
        return product
    }

    /// r || s for the nonce `t` (as bits2int), or nil when `t` is not in [1, n - 1] or r or s is 0
    /// (the caller derives the next candidate).
    private func signature(nonce t: SecretBytes, e: OpaquePointer, order: OpaquePointer) throws -> [UInt8]? {
        let k = try t.withBytes { try number($0, $1) }
        guard BN_is_zero(k) == 0, BN_cmp(k, order) < 0 else { return nil }
        guard let point = EC_POINT_new(group) else { throw OpenSSLError(.allocationFailed, "EC_POINT_new failed") }
        defer { EC_POINT_clear_free(point) }
        let affineX = try number()
        let r = try number()
        guard EC_POINT_mul(group, point, k, nil, nil, context) == 1,
            EC_POINT_get_affine_coordinates(group, point, affineX, nil, context) == 1,
            BN_nnmod(r, affineX, order, context) == 1
        else { throw OpenSSLError(.signingFailed, "k·G failed") }
        guard BN_is_zero(r) == 0 else { return nil }
        // The blinding factor b, uniform in [1, n - 1], new for each signature.
        let blind = try number()
        var drawn = false
        for _ in 0..<8 where !drawn {
            guard BN_priv_rand_range_ex(blind, order, 0, context) == 1 else {
                throw OpenSSLError(.signingFailed, "no random blinding factor (BN_priv_rand_range_ex)")
            }
            drawn = BN_is_zero(blind) == 0
        }
        guard drawn else { throw OpenSSLError(.signingFailed, "the random blinding factor kept coming out 0") }
        // s = (k·b)⁻¹ · (b·e + b·r·d) mod n = k⁻¹ (e + r·d) mod n; the inverse as (k·b)^(n-2).
        let exponent = try number()
        let inverse = try number()
        let sum = try number()
        let kb = try multiply(k, blind)
        guard BN_copy(exponent, order) != nil, BN_sub_word(exponent, 2) == 1,
            BN_mod_exp_mont_consttime(inverse, kb, exponent, order, context, montgomery) == 1
        else { throw OpenSSLError(.signingFailed, "the nonce's inverse failed") }
        let blindedSecret = try multiply(blind, secret)
        let rd = try multiply(blindedSecret, r)
        let be = try multiply(blind, e)
        guard BN_mod_add_quick(sum, rd, be, order) == 1 else {
            throw OpenSSLError(.signingFailed, "BN_mod_add_quick failed")
        }
        let s = try multiply(inverse, sum)
        guard BN_is_zero(s) == 0 else { return nil }
        return try bytes(r) + bytes(s)
    }
}
