import CRdKafka

extension KafkaConsumerMessage {
    /// Copies a consumed record out of librdkafka's buffer (the caller destroys the message).
    init(copying message: UnsafeMutablePointer<rd_kafka_message_t>) {
        let record = message.pointee
        let topic = String(cString: rd_kafka_topic_name(record.rkt))
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
