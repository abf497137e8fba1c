import Kafka

@testable import Worker

/// One record of the simulated input topic.
struct RecordID: Hashable, Comparable, CustomStringConvertible {
    var partition: Int32
    var offset: Int64

    static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.partition, lhs.offset) < (rhs.partition, rhs.offset)
    }

    var description: String { "\(partition)@\(offset)" }
}

/// The simulated Kafka cluster: the input topic's partitions (with offsets that hold no record, as a
/// transaction marker leaves), what the group has committed for each, the progress topic's records,
/// and which member the group gives each partition to.
struct SimulatedKafka {
    static let topic = "events"

    struct Log {
        /// Offsets that hold a record, in order.
        var records: [Int64] = []
        /// The next offset to write.
        var end: Int64 = 0
    }

    /// A committed offset as the broker stores it.
    struct Stored {
        var offset: Int64
        var metadata: String?
    }

    var logs: [Int32: Log]
    var committed: [Int32: Stored] = [:]
    /// Records of the progress topic, by partition: the committed offset each was written for, and
    /// the done records from it on (newest last).
    var progress: [Int32: [(committed: Int64, done: OffsetRanges)]] = [:]
    /// The member each partition is assigned to (its instance number), if any.
    var owner: [Int32: Int] = [:]
    /// The broker drops commit metadata (as Tansu does): done records go to the progress topic.
    let dropsMetadata: Bool
    /// The broker's `offset.metadata.max.bytes`.
    let metadataMaxBytes: Int

    init(partitions: Int32, dropsMetadata: Bool, metadataMaxBytes: Int) {
        logs = Dictionary(uniqueKeysWithValues: (0..<partitions).map { ($0, Log()) })
        self.dropsMetadata = dropsMetadata
        self.metadataMaxBytes = metadataMaxBytes
    }

    var partitions: [Int32] { logs.keys.sorted() }

    static func partition(_ number: Int32) -> KafkaTopicPartition {
        KafkaTopicPartition(topic: topic, partition: number)
    }

    mutating func append(to partition: Int32, markerFirst: Bool) {
        if markerFirst { logs[partition]!.end += 1 }
        logs[partition]!.records.append(logs[partition]!.end)
        logs[partition]!.end += 1
    }

    /// Records at or after `offset`, at most `limit`.
    func fetch(_ partition: Int32, from offset: Int64, limit: Int) -> [Int64] {
        let records = logs[partition]!.records
        var low = 0
        var high = records.count
        while low < high {
            let middle = (low + high) / 2
            if records[middle] < offset { low = middle + 1 } else { high = middle }
        }
        return Array(records[low..<min(records.count, low + limit)])
    }

    /// The committed offsets of these partitions as a consumer reads them back (`nil` where none).
    func committedOffsets(_ partitions: [Int32]) -> [KafkaTopicPartition: KafkaTopicPartitionOffset] {
        var read: [KafkaTopicPartition: KafkaTopicPartitionOffset] = [:]
        for number in partitions {
            guard let stored = committed[number] else { continue }
            let partition = Self.partition(number)
            read[partition] = KafkaTopicPartitionOffset(partition, offset: stored.offset, metadata: stored.metadata)
        }
        return read
    }

    /// What the progress topic says for each bare committed offset: its newest record written for it.
    func progressRecords(for committed: [KafkaTopicPartition: KafkaTopicPartitionOffset])
        -> [KafkaTopicPartition: OffsetRanges]
    {
        var found: [KafkaTopicPartition: OffsetRanges] = [:]
        for (partition, stored) in committed where stored.metadata == nil {
            found[partition] = progressRecord(of: partition.partition, for: stored.offset)
        }
        return found
    }

    /// The progress topic's newest record for this partition written for this committed offset.
    func progressRecord(of partition: Int32, for committed: Int64) -> OffsetRanges? {
        progress[partition]?.last(where: { $0.committed == committed })?.done
    }

    /// What the group would tell the partition's next owner is done: the committed offset and its
    /// done records (metadata, else the progress topic), as the sim itself reads them.
    func coverage(of partition: Int32) -> (offset: Int64, done: OffsetRanges)? {
        guard let stored = committed[partition] else { return nil }
        var done = OffsetRanges()
        if let text = stored.metadata, let decoded = try? CommitMetadata.decode(text, committed: stored.offset) {
            done = decoded.done
        } else if stored.metadata == nil, let record = progressRecord(of: partition, for: stored.offset) {
            done = record
        }
        return (stored.offset, done)
    }
}
