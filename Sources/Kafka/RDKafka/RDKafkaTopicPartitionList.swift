internal import CRdKafka

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An `rd_kafka_topic_partition_list_t` owned by Swift: created here, freed in `deinit`, reached only
/// through `withPointer`.
final class RDKafkaTopicPartitionList {
    private let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(capacity: Int = 1) {
        pointer = rd_kafka_topic_partition_list_new(Int32(max(capacity, 1)))
    }

    convenience init(_ partitions: some Collection<KafkaTopicPartition>) {
        self.init(capacity: partitions.count)
        for partition in partitions { add(partition.topic, partition.partition) }
    }

    convenience init(_ offsets: some Collection<KafkaTopicPartitionOffset>) {
        self.init(capacity: offsets.count)
        for offset in offsets {
            let element = add(offset.topicPartition.topic, offset.topicPartition.partition)
            element.pointee.offset = offset.offset
            if let metadata = offset.metadata, !metadata.isEmpty {
                // The list owns it: rd_kafka_topic_partition_list_destroy frees it with free().
                let bytes = Array(metadata.utf8)
                let copy = malloc(bytes.count)!
                bytes.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
                element.pointee.metadata = copy
                element.pointee.metadata_size = bytes.count
            }
        }
    }

    /// A subscription list: topics with no partition.
    convenience init(topics: [String]) {
        self.init(capacity: topics.count)
        for topic in topics { add(topic, RD_KAFKA_PARTITION_UA) }
    }

    deinit {
        rd_kafka_topic_partition_list_destroy(pointer)
    }

    @discardableResult
    private func add(_ topic: String, _ partition: Int32) -> UnsafeMutablePointer<rd_kafka_topic_partition_t> {
        rd_kafka_topic_partition_list_add(pointer, topic, partition)
    }

    func withPointer<T>(_ body: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) throws -> T) rethrows -> T {
        try body(pointer)
    }

    /// Reads a list librdkafka owns (callback arguments) without taking it over.
    static func partitions(of list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> [KafkaTopicPartition] {
        entries(of: list).map { $0.0 }
    }

    /// Each entry with its offset and per-partition error.
    static func entries(
        of list: UnsafePointer<rd_kafka_topic_partition_list_t>
    ) -> [(KafkaTopicPartition, offset: Int64, error: rd_kafka_resp_err_t)] {
        (0..<Int(list.pointee.cnt)).map { index in
            let element = list.pointee.elems[index]
            return (
                KafkaTopicPartition(topic: String(cString: element.topic), partition: element.partition),
                element.offset, element.err
            )
        }
    }

    /// The first per-partition error in the list, if any.
    var firstError: KafkaError? {
        for (partition, _, err) in Self.entries(of: pointer) where err != RD_KAFKA_RESP_ERR_NO_ERROR {
            return KafkaError(err, "\(partition): " + String(cString: rd_kafka_err2str(err)))
        }
        return nil
    }

    var offsets: [KafkaTopicPartitionOffset] {
        Self.entries(of: pointer).map { KafkaTopicPartitionOffset($0.0, offset: $0.offset) }
    }

    /// Each entry's offset with its metadata (librdkafka gives an empty one back as none).
    var offsetsWithMetadata: [KafkaTopicPartitionOffset] {
        (0..<Int(pointer.pointee.cnt)).map { index in
            let element = pointer.pointee.elems[index]
            var metadata: String?
            if let bytes = element.metadata, element.metadata_size > 0 {
                metadata = String(
                    decoding: UnsafeRawBufferPointer(start: bytes, count: element.metadata_size), as: UTF8.self)
            }
            return KafkaTopicPartitionOffset(
                KafkaTopicPartition(topic: String(cString: element.topic), partition: element.partition),
                offset: element.offset, metadata: metadata)
        }
    }
}
