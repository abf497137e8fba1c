import Foundation
import TestPeers
import Testing

@testable import APNs

/// ES256 with RFC 6979's deterministic nonce: the same key and message sign to the same bytes on
/// every machine, so that every pod of a fleet signs one provider token per period.
@Suite("Deterministic ES256 (RFC 6979)")
struct DeterministicSignatureTests {
    /// RFC 6979, A.2.5: the P-256 key of the test vectors, as a SEC 1 `EC PRIVATE KEY` PEM.
    static func rfcKey() throws -> OpenSSLPrivateKey {
        let scalar = hex("C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721")
        // ECPrivateKey ::= SEQUENCE { version 1, privateKey OCTET STRING, [0] prime256v1 }
        let der: [UInt8] =
            [0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20] + scalar
            + [0xA0, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        let pem = "-----BEGIN EC PRIVATE KEY-----\n\(Data(der).base64EncodedString())\n-----END EC PRIVATE KEY-----\n"
        return try OpenSSLPrivateKey(pem: Array(pem.utf8))
    }

    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    @Test(
        "the RFC's P-256 / SHA-256 vectors: 'sample' and 'test'",
        arguments: [
            (
                "sample", "EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716",
                "F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"
            ),
            (
                "test", "F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367",
                "019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083"
            ),
        ])
    func rfcVectors(_ message: String, _ r: String, _ s: String) throws {
        let signature = try Self.rfcKey().signES256Deterministic(Array(message.utf8))
        #expect(signature == Self.hex(r) + Self.hex(s))
    }

    @Test("one key and message give the same bytes every time; another message, another signature")
    func sameBytes() throws {
        let key = try Self.rfcKey()
        let claims = Array(#"{"iss":"ABCDE12345","iat":1800000000}"#.utf8)
        let first = try key.signES256Deterministic(claims)
        #expect(try key.signES256Deterministic(claims) == first)
        #expect(try key.signES256Deterministic(claims + [0x20]) != first)
        #expect(first.count == 64)
    }

    /// Every implementation this OpenSSL offers: RFC6979Signer always, OpenSSL's own where it signs
    /// deterministically (3.2 and later; Debian 12's 3.0 does not).
    static func implementations() throws -> [DeterministicES256.Implementation] {
        let key = try OpenSSLPrivateKey.generateP256()
        let offered = try key.withPointer { try OpenSSLNonceTypeSigner.sign([1], key: $0) } != nil
        return offered ? [.rfc6979, .openSSL] : [.rfc6979]
    }

    // The reference is OpenSSL 3.5's own deterministic ECDSA (PyPI cryptography's), so the signer
    // built here is held to another implementation of the RFC, not only to its two vectors; and
    // where this process links an OpenSSL that offers its own, that one is held to the same bytes.
    @Test("the same bytes as OpenSSL's own deterministic ECDSA: the RFC's key and 40 random keys, 3 messages each")
    func sameBytesAsOpenSSL() throws {
        let reference = try ES256Reference.signatures(
            scalars: [
                ("C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721", "sample"),
                ("C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721", "test"),
            ], random: 40, seed: Int.random(in: 1...1_000_000))
        try #require(reference.count == 2 + 40 * 3)
        #expect(
            reference[0].signature == Self.hex("EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716")
                + Self.hex("F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"),
            "the reference signs the RFC's vector")
        for implementation in try Self.implementations() {
            var differing = 0
            for signed in reference {
                let key = try OpenSSLPrivateKey(pem: Array(signed.pem.utf8))
                let ours = try key.signES256Deterministic(signed.message, implementation: implementation)
                if ours != signed.signature { differing += 1 }
            }
            #expect(differing == 0, "\(implementation): \(differing) of \(reference.count) signatures differ")
        }
        // The implementation this process chose is one of those compared.
        #expect(try Self.implementations().contains(DeterministicES256.implementation))
    }

    /// A MAC that fails at its `failing`-th call (0: the first), and is OpenSSL's HMAC otherwise.
    final class FailingMAC: NonceMAC {
        let failing: Int
        let real = try! OpenSSLHMACSHA256()
        private(set) var calls = 0
        init(failing: Int) { self.failing = failing }
        func authenticate(key: SecretBytes, _ input: [MACInput], into output: SecretBytes) throws {
            defer { calls += 1 }
            if calls == failing { throw OpenSSLError(.signingFailed, "HMAC failed (test)") }
            try real.authenticate(key: key, input, into: output)
        }
    }

    // A failed HMAC once came out as 32 zero bytes: when the two that mix in the key and the digest
    // failed, the nonce no longer depended on the message, and two signatures sharing it give the
    // private key away. Each of the five calls of a signature (steps d to h) fails in turn here.
    @Test("an HMAC that fails at any step gives an error, never a signature", arguments: 0..<5)
    func failingMAC(_ failing: Int) throws {
        let key = try Self.rfcKey()
        let mac = FailingMAC(failing: failing)
        #expect(throws: OpenSSLError.self) {
            try key.signES256Deterministic(Array("sample".utf8), implementation: .rfc6979, mac: mac)
        }
        #expect(mac.calls == failing + 1, "it stopped at the failure")
    }

    /// A MAC whose every output is 0xFF…: every candidate nonce is at least the curve's order.
    final class RefusedCandidatesMAC: NonceMAC {
        private(set) var calls = 0
        func authenticate(key: SecretBytes, _ input: [MACInput], into output: SecretBytes) throws {
            calls += 1
            output.withMutableBytes { bytes, count in bytes.update(repeating: 0xFF, count: count) }
        }
    }

    @Test("candidates that are never usable end in an error after a bounded number, not a loop")
    func boundedCandidates() throws {
        let mac = RefusedCandidatesMAC()
        #expect(throws: OpenSSLError.self) {
            try Self.rfcKey().signES256Deterministic(Array("sample".utf8), implementation: .rfc6979, mac: mac)
        }
        #expect(mac.calls == 4 + 3 * RFC6979Signer.candidateLimit)
    }

    @Test("every signature verifies with the public key; one that does not is an error, never returned")
    func verified() throws {
        for _ in 0..<20 {
            let key = try OpenSSLPrivateKey.generateP256()
            let message = (0..<Int.random(in: 0..<200)).map { _ in UInt8.random(in: 0...255) }
            let signature = try key.signES256Deterministic(message)
            #expect(try key.withPointer { try ES256Verification.verifies(signature, message: message, key: $0) })
            var other = message
            other.append(0)
            #expect(try !key.withPointer { try ES256Verification.verifies(signature, message: other, key: $0) })
        }
        let key = try Self.rfcKey()
        for flipped in [0, 31, 32, 63] {
            do {
                _ = try key.signES256Deterministic(
                    Array("sample".utf8), implementation: .rfc6979, tamper: { $0[flipped] ^= 0x01 })
                Issue.record("a tampered signature (byte \(flipped)) was returned")
            } catch let error as OpenSSLError {
                #expect(error.code == .signatureUnverified)
            }
        }
    }

    // s is computed blinded by a random factor: the same signature whatever the factor.
    @Test("the blinded arithmetic gives the same signature on every run")
    func blindingInvisible() throws {
        let key = try Self.rfcKey()
        let message = Array("blinded".utf8)
        let first = try key.signES256Deterministic(message, implementation: .rfc6979)
        for _ in 0..<50 { #expect(try key.signES256Deterministic(message, implementation: .rfc6979) == first) }
    }
}
