/// One partition of one topic.
public struct KafkaTopicPartition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32

    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

/// A position in a partition. For commits, `offset` is the *next* offset to consume: one past the last
/// message processed, as Kafka defines committed offsets.
public struct KafkaTopicPartitionOffset: Sendable, Hashable, CustomStringConvertible {
    public var topicPartition: KafkaTopicPartition
    public var offset: Int64

    public init(_ topicPartition: KafkaTopicPartition, offset: Int64) {
        self.topicPartition = topicPartition
        self.offset = offset
    }

    public init(topic: String, partition: Int32, offset: Int64) {
        self.init(KafkaTopicPartition(topic: topic, partition: partition), offset: offset)
    }

    public var description: String { "\(topicPartition)@\(offset)" }
}

/// Kafka's logical offsets, for `KafkaConsumer.assign(_:)`.
public enum KafkaOffset {
    /// The first record still stored.
    public static let beginning: Int64 = -2
    /// After the last record: only new records are read.
    public static let end: Int64 = -1
    /// The group's committed offset (or `autoOffsetReset` where there is none).
    public static let stored: Int64 = -1000
}
