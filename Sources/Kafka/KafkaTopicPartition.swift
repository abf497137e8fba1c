/// One partition of one topic.
package struct KafkaTopicPartition: Sendable, Hashable, Comparable, CustomStringConvertible {
    package var topic: String
    package var partition: Int32

    package init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    package var description: String { "\(topic)[\(partition)]" }

    package static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

/// A position in a partition. For commits, `offset` is the *next* offset to consume: one past the last
/// message processed, as Kafka defines committed offsets.
package struct KafkaTopicPartitionOffset: Sendable, Hashable, CustomStringConvertible {
    package var topicPartition: KafkaTopicPartition
    package var offset: Int64
    /// The offset-commit metadata stored with a committed offset (Kafka keeps a string of up to the
    /// broker's `offset.metadata.max.bytes`, 4,096 by default; some brokers drop it). `nil` commits
    /// none, and reads back where the broker has none.
    package var metadata: String?

    package init(_ topicPartition: KafkaTopicPartition, offset: Int64, metadata: String? = nil) {
        self.topicPartition = topicPartition
        self.offset = offset
        self.metadata = metadata
    }

    package init(topic: String, partition: Int32, offset: Int64) {
        self.init(KafkaTopicPartition(topic: topic, partition: partition), offset: offset)
    }

    package var description: String { "\(topicPartition)@\(offset)" }
}

/// Kafka's logical offsets, for `KafkaConsumer.assign(_:)`.
package enum KafkaOffset {
    /// The first record still stored.
    package static let beginning: Int64 = -2
    /// After the last record: only new records are read.
    package static let end: Int64 = -1
    /// The group's committed offset (or `autoOffsetReset` where there is none).
    package static let stored: Int64 = -1000
}
