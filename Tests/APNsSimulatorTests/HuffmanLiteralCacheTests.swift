@testable import APNsSimulator
import NIOCore
import NIOHPACK
import Testing

/// The Huffman literal cache changes how header values are coded, never what they are: the blocks it
/// hands on decode to the same headers (and leave the same dynamic table) as the client's, other frames
/// pass byte for byte, and anything it does not understand passes untouched.
@Suite("Huffman literal cache")
struct HuffmanLiteralCacheTests {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let token = "bearer " + String(repeating: "eyJhbGciOiJFUzI1NiJ9.", count: 10)
    static let path = "/3/device/" + String(repeating: "00fc13adff7851", count: 4)

    struct Frame: Equatable {
        var type: UInt8
        var flags: UInt8
        var streamID: UInt32
        var payload: [UInt8]
    }

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF), type, flags] + [
            UInt8(stream >> 24), UInt8((stream >> 16) & 0xFF), UInt8((stream >> 8) & 0xFF), UInt8(stream & 0xFF),
        ] + payload
    }

    /// A request header block as nghttp2 codes it: Huffman everywhere, the token never indexed, the path
    /// not indexed, the topic indexed.
    static func block(_ encoder: inout HPACKEncoder, extra: String = "") throws -> [UInt8] {
        try encoder.beginEncoding(allocator: ByteBufferAllocator())
        try encoder.append(header: ":method", value: "POST")
        try encoder.appendNonIndexed(header: ":path", value: path)
        try encoder.appendNeverIndexed(header: "authorization", value: token + extra)
        try encoder.append(header: "apns-topic", value: "com.example.app")
        return Array(try encoder.endEncoding().readableBytesView)
    }

    static func parse(_ bytes: [UInt8]) -> (prefix: [UInt8], frames: [Frame]) {
        var frames: [Frame] = []
        var i = preface.count
        while i + 9 <= bytes.count {
            let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            let id =
                UInt32(bytes[i + 5]) << 24 | UInt32(bytes[i + 6]) << 16 | UInt32(bytes[i + 7]) << 8
                | UInt32(bytes[i + 8])
            frames.append(
                Frame(type: bytes[i + 3], flags: bytes[i + 4], streamID: id, payload: Array(bytes[i + 9..<i + 9 + n])))
            i += 9 + n
        }
        #expect(i == bytes.count)
        return (Array(bytes.prefix(preface.count)), frames)
    }

    /// Feeds `input` in pieces of `chunk` bytes and returns everything handed on.
    static func run(_ input: [UInt8], chunk: Int) -> [UInt8] {
        var rewriter = HuffmanLiteralRewriter(allocator: ByteBufferAllocator())
        var out: [UInt8] = []
        var i = 0
        while i < input.count {
            var piece = ByteBuffer(bytes: input[i..<min(i + chunk, input.count)])
            let original = piece
            if let handed = rewriter.process(&piece) {
                out += handed.readableBytesView
            } else {
                out += original.readableBytesView
            }
            i += chunk
        }
        return out
    }

    /// Each block's headers as `name: value (indexing)`, decoded in order by one decoder (so the dynamic
    /// table carries over as on a connection).
    static func decode(_ blocks: [[UInt8]]) throws -> [[String]] {
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        return try blocks.map { block in
            var buffer = ByteBuffer(bytes: block)
            return try decoder.decodeHeaders(from: &buffer).map { "\($0.name): \($0.value) (\($0.indexable))" }
        }
    }

    @Test(
        "in any chunking, rewritten header blocks decode to the same headers, and other frames pass byte for byte",
        arguments: [1, 7, 64, 100_000])
    func sameHeadersOtherFramesUntouched(chunk: Int) throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let first = try Self.block(&encoder)
        let second = try Self.block(&encoder)
        let third = try Self.block(&encoder, extra: "x")
        let settings = Self.frame(type: 0x4, flags: 0, stream: 0, [0, 3, 0, 0, 0, 100])
        let body = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        // Padded with priority: pad length 3, then 5 priority bytes, the block, three padding bytes.
        let padded = [3, 0, 0, 0, 0, 16] + third + [0, 0, 0]
        let input =
            Self.preface + settings
            + Self.frame(type: 0x1, flags: 0x4, stream: 1, first)
            + Self.frame(type: 0x0, flags: 0x1, stream: 1, body)
            + Self.frame(type: 0x1, flags: 0x5, stream: 3, second)
            + Self.frame(type: 0x1, flags: 0x4 | 0x8 | 0x20 | 0x1, stream: 5, padded)
        let output = Self.run(input, chunk: chunk)
        let (inPrefix, inFrames) = Self.parse(input)
        let (outPrefix, outFrames) = Self.parse(output)
        #expect(outPrefix == inPrefix)
        try #require(outFrames.count == inFrames.count)
        #expect(outFrames[0] == inFrames[0])
        #expect(outFrames[2] == inFrames[2])
        for i in [1, 3, 4] {
            #expect(outFrames[i].flags == inFrames[i].flags && outFrames[i].streamID == inFrames[i].streamID)
            // The token and the path went plain: longer than their Huffman codes.
            #expect(outFrames[i].payload.count > inFrames[i].payload.count)
        }
        #expect(Array(outFrames[4].payload.prefix(6)) == [3, 0, 0, 0, 0, 16])
        #expect(Array(outFrames[4].payload.suffix(3)) == [0, 0, 0])
        let outBlocks = [
            outFrames[1].payload, outFrames[3].payload, Array(outFrames[4].payload.dropFirst(6).dropLast(3)),
        ]
        let expected = try Self.decode([first, second, third])
        let got = try Self.decode(outBlocks)
        #expect(got == expected)
        #expect(got[2].contains("authorization: \(Self.token)x (\(HPACKIndexing.neverIndexed))"))
    }

    @Test(
        "bytes the cache cannot parse pass untouched: no preface, a cut or continued block, a huge frame, bad Huffman")
    func unknownBytesPassUntouched() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let block = try Self.block(&encoder)
        let headers = Self.frame(type: 0x1, flags: 0x4, stream: 1, block)
        // Not the preface.
        let noPreface = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8) + headers
        #expect(Self.run(noPreface, chunk: 5) == noPreface)
        // A header block cut short, one spread over CONTINUATION, and a frame over the size limit.
        let cut = Self.preface + Self.frame(type: 0x1, flags: 0x4, stream: 1, Array(block.dropLast(3)))
        #expect(Self.run(cut, chunk: 100) == cut)
        let split =
            Self.preface + Self.frame(type: 0x1, flags: 0, stream: 1, Array(block.prefix(20)))
            + Self.frame(type: 0x9, flags: 0x4, stream: 1, Array(block.dropFirst(20)))
        #expect(Self.run(split, chunk: 100) == split)
        let huge =
            Self.preface + Self.frame(type: 0x0, flags: 0, stream: 1, [UInt8](repeating: 1, count: 16_385)) + headers
        #expect(Self.run(huge, chunk: 1000) == huge)
        // A Huffman string that does not decode (all ones past the padding: EOS).
        let badValue: [UInt8] = [0x00, 0x01, UInt8(ascii: "a"), 0x80 | 20] + [UInt8](repeating: 0xFF, count: 20)
        let bad = Self.preface + Self.frame(type: 0x1, flags: 0x4, stream: 1, badValue)
        #expect(Self.run(bad, chunk: 100) == bad)
    }

    @Test("500 random header blocks, one connection's encoder and decoder: the same headers after rewriting")
    func randomBlocksDecodeTheSame() throws {
        var random = SplitMix64(seed: 20_261_123)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789-_.~!/+=ABCXYZ ".utf8)
        // Values repeat (as a client's do), so the cache is hit as well as filled and evicted.
        var pool: [String] = []
        for _ in 0..<12 {
            let length = Int.random(in: 0...300, using: &random)
            var value = String(
                decoding: (0..<length).map { _ in alphabet.randomElement(using: &random)! }, as: UTF8.self)
            if Bool.random(using: &random) && !value.isEmpty { value += "é" }  // not ASCII: passed on as it came
            pool.append(value)
        }
        var input = Self.preface
        var blocks: [[UInt8]] = []
        for stream in 0..<500 {
            try encoder.beginEncoding(allocator: ByteBufferAllocator())
            for field in 0..<Int.random(in: 1...8, using: &random) {
                let name = field == 0 ? ":path" : "x-field-\(Int.random(in: 0..<5, using: &random))"
                let value = pool.randomElement(using: &random)!
                switch Int.random(in: 0..<3, using: &random) {
                case 0: try encoder.append(header: name, value: value)
                case 1: try encoder.appendNonIndexed(header: name, value: value)
                default: try encoder.appendNeverIndexed(header: name, value: value)
                }
            }
            let block = Array(try encoder.endEncoding().readableBytesView)
            blocks.append(block)
            input += Self.frame(type: 0x1, flags: 0x5, stream: UInt32(2 * stream + 1), block)
        }
        for chunk in [3, 1000, 65_536] {
            let (_, frames) = Self.parse(Self.run(input, chunk: chunk))
            try #require(frames.count == blocks.count)
            #expect(try Self.decode(frames.map(\.payload)) == Self.decode(blocks), "chunk \(chunk)")
        }
    }

    @Test("random bytes after the preface never trap; a stream of them is handed on whole or rewritten")
    func randomBytesNeverTrap() {
        var random = SplitMix64(seed: 7)
        for _ in 0..<200 {
            var input = Self.preface
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                let length = Int.random(in: 0...600, using: &random)
                let type = [UInt8(0x0), 0x1, 0x1, 0x1, 0x4, 0x9].randomElement(using: &random)!
                let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
                input += Self.frame(type: type, flags: UInt8.random(in: 0...255, using: &random), stream: 1, payload)
            }
            let output = Self.run(input, chunk: Int.random(in: 1...700, using: &random))
            #expect(output.count >= input.count, "nothing is dropped")
        }
    }

    @Test("HPACK integers with a 7-bit prefix round-trip through write and read")
    func integersRoundTrip() {
        for value in [0, 1, 14, 15, 126, 127, 128, 300, 16_384, 1 << 20] {
            var buffer = ByteBuffer()
            HuffmanLiteralRewriter.writeInteger(value, prefix: 7, flags: 0, to: &buffer)
            let decoded = buffer.withUnsafeReadableBytes { HuffmanLiteralRewriter.readInteger($0, at: 0, prefix: 7) }
            #expect(decoded?.0 == value && decoded?.1 == buffer.readableBytes)
        }
    }
}

/// The simulator's fault generator, seeded: the same "random" blocks and frames on every run.
extension SplitMix64: RandomNumberGenerator {}
