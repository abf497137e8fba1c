import CRdKafka
import Foundation

/// `rd_kafka_produceva`: the non-variadic produce call (Swift cannot call `rd_kafka_producev`).
enum RDKafkaProduce {
    /// Enqueues a copy of `message`; returns the error if librdkafka refuses it.
    static func produce(
        _ handle: OpaquePointer, _ message: KafkaProducerMessage, opaque: UnsafeMutableRawPointer
    ) -> KafkaError? {
        // C strings for the topic and header names, freed once librdkafka has copied them.
        let names = ([message.topic] + message.headers.map(\.key)).map { strdup($0)! }
        defer { names.forEach { free($0) } }
        // All header values in one buffer: (start, count), count -1 for a null value.
        var headerBytes: [UInt8] = []
        var headerSpans: [(Int, Int)] = []
        for header in message.headers {
            if let value = header.value {
                headerSpans.append((headerBytes.count, value.count))
                headerBytes.append(contentsOf: value)
            } else {
                headerSpans.append((0, -1))
            }
        }
        let error: OpaquePointer? = headerBytes.withUnsafeBytes { headerBuffer in
            withBytes(message.key) { key in
                withBytes(message.value) { value in
                    var fields: [rd_kafka_vu_t] = []
                    fields.reserveCapacity(6 + message.headers.count)
                    var field = rd_kafka_vu_t()
                    field.vtype = RD_KAFKA_VTYPE_TOPIC
                    field.u.cstr = UnsafePointer(names[0])
                    fields.append(field)
                    if let partition = message.partition {
                        field = rd_kafka_vu_t()
                        field.vtype = RD_KAFKA_VTYPE_PARTITION
                        field.u.i32 = partition
                        fields.append(field)
                    }
                    if let key {
                        field = rd_kafka_vu_t()
                        field.vtype = RD_KAFKA_VTYPE_KEY
                        field.u.mem.ptr = UnsafeMutableRawPointer(mutating: key.baseAddress)
                        field.u.mem.size = key.count
                        fields.append(field)
                    }
                    if let value {
                        field = rd_kafka_vu_t()
                        field.vtype = RD_KAFKA_VTYPE_VALUE
                        field.u.mem.ptr = UnsafeMutableRawPointer(mutating: value.baseAddress)
                        field.u.mem.size = value.count
                        fields.append(field)
                    }
                    for (index, (start, count)) in headerSpans.enumerated() {
                        field = rd_kafka_vu_t()
                        field.vtype = RD_KAFKA_VTYPE_HEADER
                        field.u.header.name = UnsafePointer(names[index + 1])
                        if count >= 0 {
                            field.u.header.val = headerBuffer.baseAddress.map { UnsafeRawPointer($0 + start) }
                                ?? UnsafeRawPointer(names[index + 1])  // zero-length value: any valid pointer
                            field.u.header.size = count
                        } else {
                            field.u.header.val = nil
                            field.u.header.size = 0
                        }
                        fields.append(field)
                    }
                    if let timestamp = message.timestampMilliseconds {
                        field = rd_kafka_vu_t()
                        field.vtype = RD_KAFKA_VTYPE_TIMESTAMP
                        field.u.i64 = timestamp
                        fields.append(field)
                    }
                    field = rd_kafka_vu_t()
                    field.vtype = RD_KAFKA_VTYPE_MSGFLAGS
                    field.u.i = RD_KAFKA_MSG_F_COPY
                    fields.append(field)
                    field = rd_kafka_vu_t()
                    field.vtype = RD_KAFKA_VTYPE_OPAQUE
                    field.u.ptr = opaque
                    fields.append(field)
                    return fields.withUnsafeMutableBufferPointer {
                        rd_kafka_produceva(handle, $0.baseAddress, $0.count)
                    }
                }
            }
        }
        return error.map { KafkaError(consuming: $0) }
    }

    /// Scoped bytes of an optional array; an empty array still gets a non-nil (dangling-safe) pointer.
    private static func withBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        guard let bytes else { return body(nil) }
        if bytes.isEmpty {
            var zero: UInt8 = 0
            return withUnsafeBytes(of: &zero) { body(UnsafeRawBufferPointer(start: $0.baseAddress, count: 0)) }
        }
        return bytes.withUnsafeBytes { body($0) }
    }
}
