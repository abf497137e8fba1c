import Foundation
import NIOCore
import NIOHPACK

/// Sits in front of the HTTP/2 handler and replaces the Huffman-coded values a client repeats on every
/// request with the same values sent plainly, so NIOHPACK copies them instead of Huffman-decoding them
/// again. A client never indexes its `authorization` token (about 250 characters) or, like nghttp2, the
/// `:path`, so without this every request paid a Huffman decode of both: the largest single cost of a
/// request (about a tenth of it).
///
/// RFC 7541 makes Huffman coding the encoder's choice per string, so the header list, the dynamic table
/// and every answer stay exactly what they were. Only values of literals without indexing (or never
/// indexed) are rewritten, only in HEADERS frames that carry a whole header block, only when the value
/// decodes (with NIOHPACK's own decoder) to ASCII, and only when the frame stays within the default
/// maximum frame size. Anything else, malformed input included, passes through byte for byte, so the
/// HTTP/2 handler sees and answers it as before.
final class HuffmanLiteralCacheHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var rewriter: HuffmanLiteralRewriter

    init(allocator: ByteBufferAllocator) {
        rewriter = HuffmanLiteralRewriter(allocator: allocator)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if let out = rewriter.process(&bytes) {
            context.fireChannelRead(wrapInboundOut(out))
        } else {
            context.fireChannelRead(data)
        }
    }
}

/// The byte-level work of ``HuffmanLiteralCacheHandler``: the client preface, then frames; HEADERS frames
/// are gathered whole, every other frame is copied as it arrives.
package struct HuffmanLiteralRewriter {
    /// SETTINGS_MAX_FRAME_SIZE's default, which the simulator never raises.
    static let maximumFrameSize = 16_384
    /// Shorter Huffman strings are left alone: decoding them costs little.
    static let minimumCachedLength = 16
    static let cacheSize = 4
    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private enum State {
        case preface(matched: Int)
        case frameHeader
        /// Copying the payload of a frame other than HEADERS.
        case copying(remaining: Int)
        /// Gathering a HEADERS frame (header included) of this total size.
        case headers(total: Int)
        /// Something unexpected: every byte passes through from now on.
        case off
    }

    private struct Entry {
        var huffman: [UInt8]
        var plain: [UInt8]
    }

    private var state = State.preface(matched: 0)
    private var pending: ByteBuffer
    private var cache: [Entry] = []
    private var nextVictim = 0
    private var decoder: HPACKDecoder
    private let allocator: ByteBufferAllocator

    package init(allocator: ByteBufferAllocator) {
        self.allocator = allocator
        pending = allocator.buffer(capacity: 0)
        decoder = HPACKDecoder(allocator: allocator)
    }

    /// The bytes to hand on, or `nil` to hand on the input unchanged.
    package mutating func process(_ input: inout ByteBuffer) -> ByteBuffer? {
        if case .off = state { return nil }
        var out = allocator.buffer(capacity: input.readableBytes + 512)
        input.withUnsafeReadableBytes { consume($0, into: &out) }
        input.moveReaderIndex(to: input.writerIndex)
        return out
    }

    private mutating func consume(_ bytes: UnsafeRawBufferPointer, into out: inout ByteBuffer) {
        var i = 0
        while i < bytes.count {
            let available = bytes.count - i
            switch state {
            case .off:
                out.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[i...]))
                i = bytes.count
            case .preface(let matched):
                let take = min(Self.preface.count - matched, available)
                let piece = UnsafeRawBufferPointer(rebasing: bytes[i..<i + take])
                out.writeBytes(piece)
                i += take
                if !piece.elementsEqual(Self.preface[matched..<matched + take]) {
                    state = .off
                } else {
                    state = matched + take == Self.preface.count ? .frameHeader : .preface(matched: matched + take)
                }
            case .frameHeader where pending.readableBytes == 0 && available >= 9:
                // The usual case: the frame header (and often the whole frame) is in this read.
                let length = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
                let type = bytes[i + 3]
                if length > Self.maximumFrameSize {
                    // The HTTP/2 handler answers this; from here on it gets the bytes untouched.
                    state = .off
                } else if type == 0x1, length > 0 {
                    if available >= 9 + length {
                        rewrite(frame: UnsafeRawBufferPointer(rebasing: bytes[i..<i + 9 + length]), into: &out)
                        i += 9 + length
                    } else {
                        pending.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[i...]))
                        state = .headers(total: 9 + length)
                        i = bytes.count
                    }
                } else {
                    out.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[i..<i + 9]))
                    i += 9
                    state = length == 0 ? .frameHeader : .copying(remaining: length)
                }
            case .frameHeader:
                // A frame header split between reads: gathered in `pending`.
                let take = min(9 - pending.readableBytes, available)
                pending.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[i..<i + take]))
                i += take
                if pending.readableBytes == 9 { startFrame(out: &out) }
            case .copying(let remaining):
                let take = min(remaining, available)
                out.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[i..<i + take]))
                i += take
                state = remaining == take ? .frameHeader : .copying(remaining: remaining - take)
            case .headers(let total):
                let take = min(total - pending.readableBytes, available)
                pending.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[i..<i + take]))
                i += take
                if pending.readableBytes == total {
                    let frame = pending
                    frame.withUnsafeReadableBytes { rewrite(frame: $0, into: &out) }
                    pending.clear()
                    state = .frameHeader
                }
            }
        }
    }

    /// Decides what to do with the frame whose nine header bytes are in `pending`: a HEADERS frame is
    /// gathered behind them, any other frame's header is handed on and its payload copied as it comes.
    private mutating func startFrame(out: inout ByteBuffer) {
        let start = pending.readerIndex
        let length =
            Int(pending.getInteger(at: start, as: UInt8.self)!) << 16
            | Int(pending.getInteger(at: start + 1, as: UInt16.self)!)
        let type = pending.getInteger(at: start + 3, as: UInt8.self)!
        if length > Self.maximumFrameSize {
            state = .off
        } else if type == 0x1, length > 0 {
            state = .headers(total: 9 + length)
            return
        } else {
            state = length == 0 ? .frameHeader : .copying(remaining: length)
        }
        out.writeBuffer(&pending)
        pending.clear()
    }

    /// Writes a whole HEADERS frame to `out`, its long Huffman literals replaced where possible; as it
    /// came when anything about it is unexpected.
    private mutating func rewrite(frame: UnsafeRawBufferPointer, into out: inout ByteBuffer) {
        let start = out.writerIndex
        if !rewrite(frame: frame, startingAt: start, into: &out) {
            out.moveWriterIndex(to: start)
            out.writeBytes(frame)
        }
    }

    private mutating func rewrite(frame: UnsafeRawBufferPointer, startingAt start: Int, into out: inout ByteBuffer)
        -> Bool
    {
        let flags = frame[4]
        let endHeaders: UInt8 = 0x4
        let padded: UInt8 = 0x8
        let priority: UInt8 = 0x20
        guard flags & endHeaders != 0 else { return false }
        var blockStart = 9
        var padding = 0
        if flags & padded != 0 {
            guard frame.count > 9 else { return false }
            padding = Int(frame[9])
            blockStart += 1
        }
        if flags & priority != 0 { blockStart += 5 }
        let blockEnd = frame.count - padding
        guard blockStart <= blockEnd else { return false }
        let block = UnsafeRawBufferPointer(rebasing: frame[blockStart..<blockEnd])

        out.writeBytes(UnsafeRawBufferPointer(rebasing: frame[0..<blockStart]))
        var replaced = false
        var copiedUpTo = 0  // offset in `block` up to which bytes are in `out`
        var i = 0
        while i < block.count {
            let first = block[i]
            if first & 0x80 != 0 {
                guard let next = Self.skipInteger(block, at: i, prefix: 7) else { return false }
                i = next
                continue
            }
            if first & 0xE0 == 0x20 {
                guard let next = Self.skipInteger(block, at: i, prefix: 5) else { return false }
                i = next
                continue
            }
            let indexed = first & 0xC0 == 0x40
            guard let (nameIndex, afterIndex) = Self.readInteger(block, at: i, prefix: indexed ? 6 : 4) else {
                return false
            }
            i = afterIndex
            if nameIndex == 0 {
                guard let (_, _, afterName) = Self.readString(block, at: i) else { return false }
                i = afterName
            }
            let valueStart = i
            guard let (huffman, valueBytes, afterValue) = Self.readString(block, at: i) else { return false }
            i = afterValue
            guard !indexed, huffman, valueBytes.count >= Self.minimumCachedLength,
                let plain = plainValue(
                    huffman: valueBytes, encoded: UnsafeRawBufferPointer(rebasing: block[valueStart..<afterValue]))
            else { continue }
            out.writeBytes(UnsafeRawBufferPointer(rebasing: block[copiedUpTo..<valueStart]))
            Self.writeInteger(plain.count, prefix: 7, flags: 0, to: &out)
            out.writeBytes(plain)
            copiedUpTo = afterValue
            replaced = true
        }
        guard replaced else { return false }
        out.writeBytes(UnsafeRawBufferPointer(rebasing: block[copiedUpTo...]))
        out.writeBytes(UnsafeRawBufferPointer(rebasing: frame[blockEnd...]))
        let length = out.writerIndex - start - 9
        guard length <= Self.maximumFrameSize else { return false }
        out.setInteger(UInt8(length >> 16), at: start)
        out.setInteger(UInt16(length & 0xFFFF), at: start + 1)
        return true
    }

    /// The plain bytes of a Huffman-coded value: from the cache, or decoded once by NIOHPACK (as the value
    /// of a one-header block) and remembered. `nil` when it does not decode or is not ASCII.
    private mutating func plainValue(huffman: UnsafeRawBufferPointer, encoded: UnsafeRawBufferPointer) -> [UInt8]? {
        for entry in cache where entry.huffman.count == huffman.count {
            let same = entry.huffman.withUnsafeBytes {
                memcmp($0.baseAddress!, huffman.baseAddress!, huffman.count) == 0
            }
            if same { return entry.plain }
        }
        var block = allocator.buffer(capacity: encoded.count + 3)
        block.writeBytes([0x00, 0x01, UInt8(ascii: "x")])  // literal without indexing, new name "x"
        block.writeBytes(encoded)
        guard let headers = try? decoder.decodeHeaders(from: &block), block.readableBytes == 0,
            let value = headers.first?.value
        else { return nil }
        let plain = Array(value.utf8)
        guard plain.allSatisfy({ $0 < 0x80 }) else { return nil }
        let entry = Entry(huffman: Array(huffman), plain: plain)
        if cache.count < Self.cacheSize {
            cache.append(entry)
        } else {
            cache[nextVictim] = entry
            nextVictim = (nextVictim + 1) % Self.cacheSize
        }
        return plain
    }

    // MARK: HPACK primitives (RFC 7541 5.1, 5.2)

    static func readInteger(_ bytes: UnsafeRawBufferPointer, at start: Int, prefix: Int) -> (Int, Int)? {
        guard start < bytes.count else { return nil }
        let mask = (1 << prefix) - 1
        var value = Int(bytes[start]) & mask
        var i = start + 1
        guard value == mask else { return (value, i) }
        var shift = 0
        while true {
            guard i < bytes.count, shift <= 28 else { return nil }
            let b = bytes[i]
            i += 1
            value += Int(b & 0x7F) << shift
            shift += 7
            if b & 0x80 == 0 { return (value, i) }
        }
    }

    static func skipInteger(_ bytes: UnsafeRawBufferPointer, at start: Int, prefix: Int) -> Int? {
        readInteger(bytes, at: start, prefix: prefix)?.1
    }

    /// (Huffman-coded, the string's bytes, the offset after it).
    static func readString(_ bytes: UnsafeRawBufferPointer, at start: Int) -> (Bool, UnsafeRawBufferPointer, Int)? {
        guard start < bytes.count, let (length, begin) = readInteger(bytes, at: start, prefix: 7),
            length <= bytes.count - begin
        else { return nil }
        return (
            bytes[start] & 0x80 != 0, UnsafeRawBufferPointer(rebasing: bytes[begin..<begin + length]), begin + length
        )
    }

    static func writeInteger(_ value: Int, prefix: Int, flags: UInt8, to out: inout ByteBuffer) {
        let mask = (1 << prefix) - 1
        if value < mask {
            out.writeInteger(flags | UInt8(value))
            return
        }
        out.writeInteger(flags | UInt8(mask))
        var rest = value - mask
        while rest >= 0x80 {
            out.writeInteger(UInt8(rest & 0x7F | 0x80))
            rest >>= 7
        }
        out.writeInteger(UInt8(rest))
    }
}
