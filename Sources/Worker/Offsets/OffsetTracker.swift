import Kafka

/// Which consumed records are still in flight, per partition, and what can be committed.
///
/// At-least-once: an offset is committed only when every record below it in its partition is done,
/// i.e. its result event (and dead letter, if any) is acknowledged by Kafka. Events finish out of
/// order; the commit point is the lowest offset still in flight.
struct OffsetTracker {
    private var partitions: [KafkaTopicPartition: PartitionOffsets] = [:]

    /// Records in flight over all partitions.
    private(set) var inFlight = 0

    mutating func start(_ partition: KafkaTopicPartition, offset: Int64) {
        let before = partitions[partition]?.inFlight ?? 0
        partitions[partition, default: PartitionOffsets()].start(offset)
        inFlight += partitions[partition]!.inFlight - before
    }

    /// Returns false if the record is not tracked (its partition was revoked meanwhile).
    @discardableResult
    mutating func finish(_ partition: KafkaTopicPartition, offset: Int64) -> Bool {
        guard partitions[partition]?.finish(offset) == true else { return false }
        inFlight -= 1
        return true
    }

    func inFlight(in partition: KafkaTopicPartition) -> Int {
        partitions[partition]?.inFlight ?? 0
    }

    func inFlight(in selection: some Sequence<KafkaTopicPartition>) -> Int {
        selection.reduce(0) { $0 + inFlight(in: $1) }
    }

    /// The offsets that moved since the last commit, optionally only for some partitions.
    func commitCandidates(in selection: Set<KafkaTopicPartition>? = nil) -> [KafkaTopicPartitionOffset] {
        partitions.compactMap { partition, offsets in
            guard selection?.contains(partition) ?? true, let offset = offsets.commitCandidate else { return nil }
            return KafkaTopicPartitionOffset(partition, offset: offset)
        }.sorted { $0.topicPartition < $1.topicPartition }
    }

    mutating func markCommitted(_ offsets: [KafkaTopicPartitionOffset]) {
        for offset in offsets {
            partitions[offset.topicPartition]?.markCommitted(offset.offset)
        }
    }

    /// Forgets partitions that left this member; their in-flight records no longer count.
    mutating func remove(_ removed: some Sequence<KafkaTopicPartition>) {
        for partition in removed {
            if let offsets = partitions.removeValue(forKey: partition) { inFlight -= offsets.inFlight }
        }
    }
}
