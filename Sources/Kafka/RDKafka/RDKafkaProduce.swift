internal import CRdKafka

/// `rd_kafka_produceva`: the non-variadic produce call (Swift cannot call `rd_kafka_producev`).
/// librdkafka copies everything (`RD_KAFKA_MSG_F_COPY`) before returning, so all pointers here are
/// scoped to the call. The common case (no headers) allocates nothing but the field array on the stack.
enum RDKafkaProduce {
    /// Enqueues a copy of `message`; returns the error if librdkafka refuses it.
    static func produce(
        _ handle: OpaquePointer, _ message: KafkaProducerMessage, opaque: UnsafeMutableRawPointer
    ) -> KafkaError? {
        // The closures below capture scalars only: capturing `message` copied it (a retain and a
        // release of each of its arrays and strings) into several closure contexts per record.
        let partition = message.partition
        let timestamp = message.timestampMilliseconds
        let (keyBytes, valueBytes, headerList) = (message.key, message.value, message.headers)
        let error: OpaquePointer? = message.topic.withCString { topic in
            withHeaders(headerList) { headers in
                withBytes(keyBytes) { key in
                    withBytes(valueBytes) { value in
                        withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: 7 + headers.count) { fields in
                            var count = 0
                            func append(_ type: rd_kafka_vtype_t, _ fill: (inout rd_kafka_vu_t) -> Void) {
                                var field = rd_kafka_vu_t()
                                field.vtype = type
                                fill(&field)
                                fields.initializeElement(at: count, to: field)
                                count += 1
                            }
                            append(RD_KAFKA_VTYPE_TOPIC) { $0.u.cstr = topic }
                            if let partition {
                                append(RD_KAFKA_VTYPE_PARTITION) { $0.u.i32 = partition }
                            }
                            if let key {
                                append(RD_KAFKA_VTYPE_KEY) {
                                    $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: key.baseAddress)
                                    $0.u.mem.size = key.count
                                }
                            }
                            if let value {
                                append(RD_KAFKA_VTYPE_VALUE) {
                                    $0.u.mem.ptr = UnsafeMutableRawPointer(mutating: value.baseAddress)
                                    $0.u.mem.size = value.count
                                }
                            }
                            for header in headers {
                                append(RD_KAFKA_VTYPE_HEADER) {
                                    $0.u.header.name = header.name
                                    $0.u.header.val = header.value
                                    $0.u.header.size = header.size
                                }
                            }
                            if let timestamp {
                                append(RD_KAFKA_VTYPE_TIMESTAMP) { $0.u.i64 = timestamp }
                            }
                            append(RD_KAFKA_VTYPE_MSGFLAGS) { $0.u.i = RD_KAFKA_MSG_F_COPY }
                            append(RD_KAFKA_VTYPE_OPAQUE) { $0.u.ptr = opaque }
                            defer { fields.baseAddress!.deinitialize(count: count) }
                            return rd_kafka_produceva(handle, fields.baseAddress, count)
                        }
                    }
                }
            }
        }
        return error.map { KafkaError(consuming: $0) }
    }

    /// A header as librdkafka's `RD_KAFKA_VTYPE_HEADER` wants it. A null value is (nil, 0).
    private struct CHeader {
        let name: UnsafePointer<CChar>
        let value: UnsafeRawPointer?
        let size: Int
    }

    /// Scoped C views of the headers: every name (NUL-terminated) and value copied into one scoped
    /// buffer, and the views into another. Both are temporary allocations, on the stack for the few
    /// short headers a record usually has: a result event's `content-type` costs no heap allocation.
    private static func withHeaders<R>(
        _ headers: [KafkaHeader], _ body: (UnsafeBufferPointer<CHeader>) -> R
    ) -> R {
        guard !headers.isEmpty else { return body(UnsafeBufferPointer(start: nil, count: 0)) }
        // Plus one byte, so that a zero-length value at the end still points into the buffer.
        let byteCount = headers.reduce(1) { $0 + $1.key.utf8.count + 1 + ($1.value?.count ?? 0) }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: byteCount) { text in
            withUnsafeTemporaryAllocation(of: CHeader.self, capacity: headers.count) { views in
                let bytes = UnsafeMutableRawBufferPointer(text)
                var position = 0
                func copy(_ source: some Collection<UInt8>) {
                    UnsafeMutableRawBufferPointer(rebasing: bytes[position...]).copyBytes(from: source)
                    position += source.count
                }
                for (index, header) in headers.enumerated() {
                    let name = UnsafePointer(text.baseAddress! + position)
                    copy(header.key.utf8)
                    bytes[position] = 0
                    position += 1
                    let value = header.value.map { _ in UnsafeRawPointer(bytes.baseAddress! + position) }
                    if let headerValue = header.value { copy(headerValue) }
                    views.initializeElement(
                        at: index, to: CHeader(name: name, value: value, size: header.value?.count ?? 0))
                }
                defer { views.baseAddress!.deinitialize(count: headers.count) }
                return body(UnsafeBufferPointer(views))
            }
        }
    }

    /// Scoped bytes of an optional array; an empty array still gets a valid pointer.
    private static func withBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        guard let bytes else { return body(nil) }
        if bytes.isEmpty {
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1) {
                body(UnsafeRawBufferPointer(start: $0.baseAddress, count: 0))
            }
        }
        return bytes.withUnsafeBytes { body($0) }
    }
}
