import NIOCore

/// Makes Tansu's ApiVersions answers readable by librdkafka before 2.2.0.
///
/// librdkafka 2.0.2 (Debian 12's) skips one byte too few for each tagged field it meets
/// (`rd_kafka_buf_skip_tags`, fixed upstream in 2.2.0). Tansu answers ApiVersions v3 and later with
/// four top-level tagged fields, so that client fails with "Protocol read buffer underflow for
/// ApiVersion v3" and retries for ever. Of everything else librdkafka 2.0.2 negotiates with Tansu,
/// no flexible response carries a tagged field, so this one answer is the one to rewrite: the same
/// content with every tag section emptied. Any other byte passes untouched.
///
/// Kafka frames both ways: a 4-byte big-endian size, then that many bytes. A request header starts
/// `int16 api_key, int16 api_version, int32 correlation_id`; an ApiVersions response uses header v0
/// (the correlation id, no tags) whatever its version.
package enum KafkaApiVersionsRewrite {
    package static let apiVersionsKey: Int16 = 18

    /// The correlation id of a request frame (without its size prefix) whose answer must be rewritten.
    package static func correlationToRewrite(request frame: ByteBuffer) -> Int32? {
        guard let key = frame.getInteger(at: frame.readerIndex, as: Int16.self),
            let version = frame.getInteger(at: frame.readerIndex + 2, as: Int16.self),
            let correlation = frame.getInteger(at: frame.readerIndex + 4, as: Int32.self),
            key == apiVersionsKey, version >= 3
        else { return nil }
        return correlation
    }

    /// The correlation id a response frame (without its size prefix) answers.
    package static func correlation(response frame: ByteBuffer) -> Int32? {
        frame.getInteger(at: frame.readerIndex, as: Int32.self)
    }

    /// An ApiVersions v3+ response body (without its size prefix) with every tag section empty, or
    /// nil when it does not parse to its end (then the original is forwarded as it is).
    ///
    /// Layout: correlation_id int32, error_code int16, api_keys compact array (uvarint count + 1) of
    /// { api_key int16, min int16, max int16, tags }, throttle_time_ms int32, tags.
    package static func rewrite(response frame: ByteBuffer) -> ByteBuffer? {
        var input = frame
        guard let header = input.readSlice(length: 6), let countPlusOne = readUVarint(&input), countPlusOne >= 1 else {
            return nil
        }
        var output = ByteBufferAllocator().buffer(capacity: frame.readableBytes)
        output.writeImmutableBuffer(header)
        writeUVarint(countPlusOne, to: &output)
        for _ in 0..<(countPlusOne - 1) {
            guard let entry = input.readSlice(length: 6), skipTags(&input) else { return nil }
            output.writeImmutableBuffer(entry)
            output.writeInteger(UInt8(0))
        }
        guard let throttle = input.readSlice(length: 4), skipTags(&input), input.readableBytes == 0 else { return nil }
        output.writeImmutableBuffer(throttle)
        output.writeInteger(UInt8(0))
        return output
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
