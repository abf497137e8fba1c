internal import CRdKafka

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension KafkaConsumerMessage {
    /// Copies a consumed record out of librdkafka's buffer (the caller destroys the message), with
    /// its topic's name from `topicNames` (the poll thread's own): a record shares its topic's
    /// `String` instead of allocating one.
    init(copying message: UnsafeMutablePointer<rd_kafka_message_t>, topicNames: inout TopicNames) {
        let record = message.pointee
        let topic = topicNames.name(rd_kafka_topic_name(record.rkt))
        let key = record.key.map { Array(UnsafeRawBufferPointer(start: $0, count: record.key_len)) }
        let value = record.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: record.len)) }

        var headers: [KafkaHeader] = []
        var list: OpaquePointer?
        if rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list {
            var index = 0
            var name: UnsafePointer<CChar>?
            var data: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(list, index, &name, &data, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                let bytes = data.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }
                headers.append(KafkaHeader(key: name.map { String(cString: $0) } ?? "", value: bytes))
                index += 1
            }
        }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        self.init(
            topic: topic, partition: record.partition, offset: record.offset, key: key, value: value,
            headers: headers, timestampMilliseconds: timestamp >= 0 ? timestamp : nil)
    }
}

/// The topic names a consumer has seen, so that each consumed record shares its topic's `String`:
/// a name longer than 15 bytes is a heap allocation (and a UTF-8 check) when made per record.
/// Matched by content, not by librdkafka's topic handle, so a handle freed and reused for another
/// topic cannot give a record the wrong name.
struct TopicNames {
    private var names: [String] = []
    /// More names than this (a pattern subscription to many topics) are made per record again.
    static let limit = 64

    /// The names kept so far.
    var count: Int { names.count }

    mutating func name(_ cName: UnsafePointer<CChar>) -> String {
        let length = strlen(cName)
        for index in names.indices where names[index].utf8.count == length {
            // `withUTF8` also gives a short (inline) name's bytes; kept names are contiguous already.
            if names[index].withUTF8({ length == 0 || memcmp($0.baseAddress!, cName, length) == 0 }) {
                return names[index]
            }
        }
        var name = String(cString: cName)
        name.makeContiguousUTF8()
        if names.count < Self.limit { names.append(name) }
        return name
    }
}
