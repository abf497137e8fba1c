import NIOCore
import NIOHPACK
import Testing

@testable import APNs

/// Takes nothing from the session: these tests only read what it writes.
private final class SilentDelegate: Nghttp2SessionDelegate {
    func nghttp2Header(stream: UnsafeMutableRawPointer?, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {}
    func nghttp2Data(stream: UnsafeMutableRawPointer?, bytes: UnsafeRawBufferPointer) {}
    func nghttp2StreamClosed(stream: UnsafeMutableRawPointer?, streamID: Int32, errorCode: UInt32) {}
    func nghttp2Settings(maxConcurrentStreams: UInt32) {}
    func nghttp2GoAway(lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8]) {}
    func nghttp2PingAcknowledged() {}
    func nghttp2ReadBody(stream: UnsafeMutableRawPointer?, into buffer: UnsafeMutableRawBufferPointer)
        -> (count: Int, end: Bool)
    { (0, true) }
}

@Suite("HPACK on the wire, as Apple's guidance asks")
struct HPACKWireTests {
    /// The header blocks of the HEADERS frames in `bytes` (a client's output: preface, then frames).
    static func headerBlocks(_ bytes: [UInt8]) -> [[UInt8]] {
        var offset = bytes.starts(with: Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)) ? 24 : 0
        var blocks: [[UInt8]] = []
        while offset + 9 <= bytes.count {
            let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            let type = bytes[offset + 3]
            let flags = bytes[offset + 4]
            var payload = Array(bytes[(offset + 9)..<(offset + 9 + length)])
            if type == 0x1 {
                if flags & 0x8 != 0 { payload = Array(payload.dropFirst(1).dropLast(Int(payload[0]))) }  // PADDED
                if flags & 0x20 != 0 { payload = Array(payload.dropFirst(5)) }  // PRIORITY
                blocks.append(payload)
            }
            offset += 9 + length
        }
        return blocks
    }

    @Test(
        "two notifications on one connection, read back by another HPACK decoder: :path a literal without indexing, authorization never indexed, apns-id, apns-expiration and apns-collapse-id indexed once then literals"
    )
    func representations() throws {
        let pki = try TestPKI()
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: APNsSigningKey(file: pki.tokenKey))
        let delegate = SilentDelegate()
        let session = try Nghttp2Session(delegate: delegate)
        var encoder = APNsHeaderEncoder(authority: "api.push.apple.com")
        var block = Nghttp2HeaderBlock()
        for token in ["abcd", "ef01"] {
            let notification = APNsNotification(
                deviceToken: try APNsDeviceToken(token), topic: "com.example.app", pushType: .alert,
                priority: .immediate, expiration: .at(secondsSince1970: 1_800_000_000), collapseID: "c",
                apnsID: .random(), payload: Array("{}".utf8))
            let request = APNsHTTP2Request(
                content: .notification(notification), tokens: authenticator, deadline: .now(),
                completion: { _ in })
            encoder.encode(request, into: &block)
            #expect(session.submitRequest(block, streamData: nil, hasBody: false) > 0)
        }
        var output = ByteBufferAllocator().buffer(capacity: 4096)
        #expect(session.send(into: &output) == nil)
        let blocks = Self.headerBlocks(Array(output.readableBytesView))
        try #require(blocks.count == 2)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var seen: [[String: HPACKIndexing]] = []
        for block in blocks {
            var buffer = ByteBufferAllocator().buffer(bytes: block)
            let headers = try decoder.decodeHeaders(from: &buffer)
            seen.append(Dictionary(headers.map { ($0.name, $0.indexable) }, uniquingKeysWith: { first, _ in first }))
        }
        for (number, indexing) in seen.enumerated() {
            // "Encode the :path and authorization values as literal header fields without indexing."
            // nghttp2 itself sends authorization never indexed (RFC 7541 6.2.3) whatever it is
            // asked: the stricter form, also kept out of the dynamic table.
            #expect(indexing[":path"] == .nonIndexable, "request \(number + 1)")
            #expect(indexing["authorization"] == .neverIndexed, "request \(number + 1)")
        }
        // "The first time you send [apns-id, apns-expiration, apns-collapse-id] ... literal with
        // incremental indexing; for subsequent requests, ... literal header fields without indexing."
        // The second time nghttp2 can only be asked for never indexed (NO_INDEX): its own choice
        // would be to index them again.
        for name in ["apns-id", "apns-expiration", "apns-collapse-id"] {
            #expect(seen[0][name] == .indexable, "\(name), first request")
            #expect(seen[1][name] == .neverIndexed, "\(name), second request")
        }
    }
}
