import Foundation
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
}
