internal import CRdKafka

extension RDKafkaClient {
    /// The partition IDs of a topic, from the cluster's metadata. Blocks up to `timeout`.
    func partitionIDs(of topic: String, timeout: Duration) throws(KafkaError) -> [Int32] {
        guard let topicHandle = rd_kafka_topic_new(handle, topic, nil) else {
            throw KafkaError(code: .invalidArgument, message: "bad topic name '\(topic)'")
        }
        defer { rd_kafka_topic_destroy(topicHandle) }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 0, topicHandle, &metadata, Int32(clamping: timeout.milliseconds))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { throw KafkaError(err) }
        defer { rd_kafka_metadata_destroy(metadata) }
        guard metadata.pointee.topic_cnt == 1 else {
            throw KafkaError(code: .unknownTopicOrPartition, message: "no metadata for topic '\(topic)'")
        }
        let topicMetadata = metadata.pointee.topics[0]
        guard topicMetadata.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(
                topicMetadata.err, "topic '\(topic)': " + String(cString: rd_kafka_err2str(topicMetadata.err)))
        }
        return (0..<Int(topicMetadata.partition_cnt)).map { topicMetadata.partitions[$0].id }.sorted()
    }

    /// The names of every topic the cluster reports (`topicDescriptions`). Blocks up to `timeout`.
    func topicNames(timeout: Duration) throws(KafkaError) -> Set<String> {
        Set(try topicDescriptions(timeout: timeout).keys)
    }

    /// The low and high watermarks of a partition: the first offset still stored and one past the last.
    func watermarks(of partition: KafkaTopicPartition, timeout: Duration) throws(KafkaError) -> (
        low: Int64, high: Int64
    ) {
        var low: Int64 = 0
        var high: Int64 = 0
        let err = rd_kafka_query_watermark_offsets(
            handle, partition.topic, partition.partition, &low, &high, Int32(clamping: timeout.milliseconds))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, "\(partition): " + String(cString: rd_kafka_err2str(err)))
        }
        return (low, high)
    }

    /// The high watermark the last fetch response for `partition` carried (no request), or nil
    /// before one arrived.
    func fetchedHighWatermark(of partition: KafkaTopicPartition) -> Int64? {
        var low: Int64 = 0
        var high: Int64 = 0
        let err = rd_kafka_get_watermark_offsets(handle, partition.topic, partition.partition, &low, &high)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, high >= 0 else { return nil }
        return high
    }
}
