internal import COpenSSL

/// One piece of an HMAC's input, in the order given: RFC 6979 feeds HMAC_DRBG concatenations of V, a
/// separator byte, the private key's octets and the digest, and none of them is copied to make them.
enum MACInput {
    case secret(SecretBytes)
    case byte(UInt8)
    case bytes([UInt8])
}

/// HMAC-SHA-256, as RFC 6979's nonce derivation uses it. A failure is an error, never an output:
/// an HMAC that came out as zeros would make the nonce independent of the message, and two
/// signatures with one nonce give the private key away. (A seam: tests make it fail.)
protocol NonceMAC {
    /// HMAC-SHA-256 under `key` of `input`'s pieces concatenated, written to `output` (32 bytes).
    /// `output` may be `key` or a piece of `input`: both are read before it is written.
    func authenticate(key: SecretBytes, _ input: [MACInput], into output: SecretBytes) throws
}

/// HMAC-SHA-256 through OpenSSL's `EVP_MAC`, every call's return checked; the context holds the key
/// only between `authenticate`'s init and final, and is cleansed when freed.
final class OpenSSLHMACSHA256: NonceMAC {
    private let mac: OpaquePointer
    private let context: OpaquePointer

    init() throws {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            throw OpenSSLError(.signingFailed, "EVP_MAC_fetch(HMAC) failed")
        }
        guard let context = EVP_MAC_CTX_new(mac) else {
            EVP_MAC_free(mac)
            throw OpenSSLError(.allocationFailed, "EVP_MAC_CTX_new failed")
        }
        self.mac = mac
        self.context = context
        // OSSL_PARAM keeps pointers to its key and value: both live until the call returns.
        let set = "digest".withCString { key in
            "SHA256".withCString { value in
                var parameters = [
                    OSSL_PARAM_construct_utf8_string(key, UnsafeMutablePointer(mutating: value), 0),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_MAC_CTX_set_params(context, &parameters)
            }
        }
        guard set == 1 else { throw OpenSSLError(.signingFailed, "HMAC's digest cannot be set to SHA-256") }
    }

    deinit {
        EVP_MAC_CTX_free(context)
        EVP_MAC_free(mac)
    }

    func authenticate(key: SecretBytes, _ input: [MACInput], into output: SecretBytes) throws {
        guard key.withBytes({ EVP_MAC_init(context, $0, $1, nil) }) == 1 else {
            throw OpenSSLError(.signingFailed, "EVP_MAC_init (HMAC-SHA-256) failed")
        }
        for piece in input {
            let updated: Int32
            switch piece {
            case .secret(let bytes): updated = bytes.withBytes { EVP_MAC_update(context, $0, $1) }
            case .byte(let byte): updated = withUnsafePointer(to: byte) { EVP_MAC_update(context, $0, 1) }
            case .bytes(let bytes):
                updated = bytes.withUnsafeBufferPointer { EVP_MAC_update(context, $0.baseAddress, $0.count) }
            }
            guard updated == 1 else { throw OpenSSLError(.signingFailed, "EVP_MAC_update (HMAC-SHA-256) failed") }
        }
        var length = 0
        guard output.withMutableBytes({ EVP_MAC_final(context, $0, &length, $1) }) == 1, length == output.count else {
            throw OpenSSLError(.signingFailed, "EVP_MAC_final (HMAC-SHA-256) failed")
        }
    }
}
