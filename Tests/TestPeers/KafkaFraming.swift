import NIOCore

/// The bits of Kafka's wire format the proxy needs to stand for a broker's SASL: frames (a 4-byte
/// big-endian size, then that many bytes), a request header (`int16 api_key, int16 api_version,
/// int32 correlation_id`), a response's correlation id, and the unsigned varints and tag sections of
/// flexible versions.
enum KafkaWire {
    static let apiVersionsKey: Int16 = 18

    /// The correlation id a response frame (without its size prefix) answers.
    static func correlation(response frame: ByteBuffer) -> Int32? {
        frame.getInteger(at: frame.readerIndex, as: Int32.self)
    }

    /// Skips a tag section: uvarint count, then per field a uvarint tag, a uvarint size and the data.
    static func skipTags(_ buffer: inout ByteBuffer) -> Bool {
        guard let count = readUVarint(&buffer) else { return false }
        for _ in 0..<count {
            guard readUVarint(&buffer) != nil, let size = readUVarint(&buffer), size <= UInt64(buffer.readableBytes)
            else { return false }
            buffer.moveReaderIndex(forwardBy: Int(size))
        }
        return true
    }

    static func readUVarint(_ buffer: inout ByteBuffer) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while let byte = buffer.readInteger(as: UInt8.self) {
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    static func writeUVarint(_ value: UInt64, to buffer: inout ByteBuffer) {
        var value = value
        while value >= 0x80 {
            buffer.writeInteger(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        buffer.writeInteger(UInt8(value))
    }
}

/// Splits a Kafka byte stream into frames (the 4-byte size prefix is dropped from the frame and
/// written back by the forwarder).
struct KafkaFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let size = buffer.getInteger(at: buffer.readerIndex, as: Int32.self) else { return .needMoreData }
        guard size >= 0 else { throw KafkaFramingError(size: size) }
        guard buffer.readableBytes >= 4 + Int(size) else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 4)
        context.fireChannelRead(Self.wrapInboundOut(buffer.readSlice(length: Int(size))!))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws
        -> DecodingState
    {
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }
}

struct KafkaFramingError: Error, CustomStringConvertible {
    let size: Int32
    var description: String { "a Kafka frame with a negative size (\(size))" }
}
