import NIOCore
import TestPeers
import Testing

@Suite("The proxy's SASL/PLAIN exchange")
struct KafkaSASLGateTests {
    static let user = ProxySecurity.SASLPlain(username: "worker", password: "s3cret")

    /// A request frame with header v1 (client id "c") and `body`.
    static func request(key: Int16, version: Int16, correlation: Int32, body: (inout ByteBuffer) -> Void = { _ in })
        -> ByteBuffer
    {
        var buffer = ByteBuffer()
        buffer.writeInteger(key)
        buffer.writeInteger(version)
        buffer.writeInteger(correlation)
        buffer.writeInteger(Int16(1))
        buffer.writeString("c")
        body(&buffer)
        return buffer
    }

    static func handshake(_ mechanism: String, correlation: Int32 = 2) -> ByteBuffer {
        request(key: 17, version: 1, correlation: correlation) {
            $0.writeInteger(Int16(mechanism.utf8.count))
            $0.writeString(mechanism)
        }
    }

    static func authenticate(_ user: String, _ password: String, correlation: Int32 = 3) -> ByteBuffer {
        let bytes: [UInt8] = [0] + Array(user.utf8) + [0] + Array(password.utf8)
        return request(key: 36, version: 1, correlation: correlation) {
            $0.writeInteger(Int32(bytes.count))
            $0.writeBytes(bytes)
        }
    }

    @Test(
        "ApiVersions goes to the broker with its answer extended; PLAIN with the right password authenticates, then all passes"
    )
    func rightPassword() throws {
        var gate = KafkaSASLGate(user: Self.user, admitsPlainClients: false)
        #expect(
            gate.request(Self.request(key: 18, version: 3, correlation: 1)) == .forwardExtendingAnswer(correlation: 1))
        guard case .answer(var handshake) = gate.request(Self.handshake("PLAIN")) else {
            Issue.record("the handshake is answered here")
            return
        }
        #expect(handshake.readInteger(as: Int32.self) == 2)
        #expect(handshake.readInteger(as: Int16.self) == 0)
        #expect(handshake.readInteger(as: Int32.self) == 1)
        #expect(handshake.readInteger(as: Int16.self) == 5 && handshake.readString(length: 5) == "PLAIN")
        guard case .answer(var answer) = gate.request(Self.authenticate("worker", "s3cret")) else {
            Issue.record("the authentication is answered here")
            return
        }
        #expect(answer.readInteger(as: Int32.self) == 3)
        #expect(answer.readInteger(as: Int16.self) == 0)
        #expect(answer.readInteger(as: Int16.self) == -1, "no error message")
        #expect(answer.readInteger(as: Int32.self) == 0 && answer.readInteger(as: Int64.self) == 0)
        #expect(answer.readableBytes == 0)
        #expect(gate.state == .authenticated)
        #expect(gate.request(Self.request(key: 3, version: 12, correlation: 4)) == .forward)
    }

    @Test("a wrong password is answered with error 58 and a message naming the user, never the password, then closed")
    func wrongPassword() {
        var gate = KafkaSASLGate(user: Self.user, admitsPlainClients: true)
        _ = gate.request(Self.handshake("PLAIN"))
        guard case .answerAndClose(var answer) = gate.request(Self.authenticate("worker", "guess")) else {
            Issue.record("refused and closed")
            return
        }
        #expect(answer.readInteger(as: Int32.self) == 3)
        #expect(answer.readInteger(as: Int16.self) == 58)
        let length = answer.readInteger(as: Int16.self) ?? 0
        let message = answer.readString(length: Int(length)) ?? ""
        #expect(message.hasPrefix("Authentication failed") && message.contains("worker"))
        #expect(!message.contains("guess") && !message.contains("s3cret"))
    }

    @Test(
        "another mechanism gets UNSUPPORTED_SASL_MECHANISM; a request before authentication is refused unless plain clients are admitted"
    )
    func refusals() {
        var gate = KafkaSASLGate(user: Self.user, admitsPlainClients: false)
        guard case .answer(let answer) = gate.request(Self.handshake("SCRAM-SHA-256")) else {
            Issue.record("answered")
            return
        }
        #expect(answer.getInteger(at: 4, as: Int16.self) == 33)
        #expect(gate.request(Self.authenticate("worker", "s3cret")) == .refuse, "no PLAIN handshake came first")
        var strict = KafkaSASLGate(user: Self.user, admitsPlainClients: false)
        #expect(strict.request(Self.request(key: 3, version: 12, correlation: 1)) == .refuse)
        var lenient = KafkaSASLGate(user: Self.user, admitsPlainClients: true)
        #expect(lenient.request(Self.request(key: 3, version: 12, correlation: 1)) == .forward)
        #expect(lenient.state == .plain)
    }

    /// An ApiVersions v3 answer as a broker writes it: each entry with a tagged field of 2 bytes,
    /// and these top-level tagged fields.
    static func apiVersionsResponse(entries: [(Int16, Int16, Int16)], topLevelTags: [(UInt8, [UInt8])]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(Int32(7))  // correlation id
        buffer.writeInteger(Int16(0))  // error code
        buffer.writeInteger(UInt8(entries.count + 1))
        for (key, low, high) in entries {
            buffer.writeInteger(key)
            buffer.writeInteger(low)
            buffer.writeInteger(high)
            buffer.writeInteger(UInt8(1))  // one tagged field of 2 bytes in this entry
            buffer.writeBytes([0, 2, 0xAA, 0xBB])
        }
        buffer.writeInteger(Int32(0))  // throttle
        buffer.writeInteger(UInt8(topLevelTags.count))
        for (tag, data) in topLevelTags {
            buffer.writeInteger(tag)
            buffer.writeInteger(UInt8(data.count))
            buffer.writeBytes(data)
        }
        return buffer
    }

    @Test(
        "the ApiVersions answer gains SaslHandshake 0-1 and SaslAuthenticate 0-1, replacing the broker's, in key order")
    func apiVersionsExtended() throws {
        let original = Self.apiVersionsResponse(
            entries: [(0, 0, 9), (17, 0, 0), (18, 0, 3), (40, 0, 2)], topLevelTags: [(0, [1])])
        let extended = try #require(KafkaSASLWire.addingKeys(KafkaSASLWire.offeredVersions, to: original))
        var expected = ByteBuffer()
        expected.writeInteger(Int32(7))
        expected.writeInteger(Int16(0))
        expected.writeInteger(UInt8(6))
        for (key, low, high) in [(Int16(0), Int16(0), Int16(9)), (17, 0, 1), (18, 0, 3), (36, 0, 1), (40, 0, 2)] {
            expected.writeInteger(key)
            expected.writeInteger(low)
            expected.writeInteger(high)
            expected.writeInteger(UInt8(0))
        }
        expected.writeInteger(Int32(0))
        expected.writeInteger(UInt8(0))
        #expect(extended == expected)
        #expect(
            KafkaSASLWire.addingKeys(KafkaSASLWire.offeredVersions, to: original.getSlice(at: 0, length: 9)!) == nil)
    }
}
