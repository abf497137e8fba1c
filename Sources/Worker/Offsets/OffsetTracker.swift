import Kafka

/// Which consumed records are still in flight, per partition, and what can be committed.
///
/// At-least-once: an offset is committed only when every record below it in its partition is done,
/// i.e. its result event (and dead letter, if any) is acknowledged by Kafka. Events finish out of
/// order; the commit point is the lowest offset still in flight.
struct OffsetTracker {
    /// Each tracked partition's offsets, at the position `slots` names. An array changed in place
    /// rather than a dictionary of values: changing a dictionary's value in place (`d[k]?.f()`) goes
    /// through an accessor that allocates its frame, twice for every event (start and finish).
    private var offsets: [PartitionOffsets] = []
    private var slots: [KafkaTopicPartition: Int] = [:]

    /// Records in flight over all partitions.
    private(set) var inFlight = 0

    mutating func start(_ partition: KafkaTopicPartition, offset: Int64) {
        let slot = slots[partition] ?? add(partition)
        let before = offsets[slot].inFlight
        offsets[slot].start(offset)
        inFlight += offsets[slot].inFlight - before
    }

    /// Returns false if the record is not tracked (its partition was revoked meanwhile).
    @discardableResult
    mutating func finish(_ partition: KafkaTopicPartition, offset: Int64) -> Bool {
        guard let slot = slots[partition], offsets[slot].finish(offset) else { return false }
        inFlight -= 1
        return true
    }

    func inFlight(in partition: KafkaTopicPartition) -> Int {
        slots[partition].map { offsets[$0].inFlight } ?? 0
    }

    func inFlight(in selection: some Sequence<KafkaTopicPartition>) -> Int {
        selection.reduce(0) { $0 + inFlight(in: $1) }
    }

    /// The offsets that moved since the last commit, optionally only for some partitions.
    func commitCandidates(in selection: Set<KafkaTopicPartition>? = nil) -> [KafkaTopicPartitionOffset] {
        slots.compactMap { partition, slot in
            guard selection?.contains(partition) ?? true, let offset = offsets[slot].commitCandidate else { return nil }
            return KafkaTopicPartitionOffset(partition, offset: offset)
        }.sorted { $0.topicPartition < $1.topicPartition }
    }

    mutating func markCommitted(_ committed: [KafkaTopicPartitionOffset]) {
        for offset in committed {
            if let slot = slots[offset.topicPartition] { offsets[slot].markCommitted(offset.offset) }
        }
    }

    /// Forgets partitions that left this member; their in-flight records no longer count.
    mutating func remove(_ removed: some Sequence<KafkaTopicPartition>) {
        for partition in removed {
            guard let slot = slots.removeValue(forKey: partition) else { continue }
            inFlight -= offsets[slot].inFlight
            // The last slot fills the gap.
            let last = offsets.count - 1
            if slot != last, let moved = slots.first(where: { $0.value == last })?.key {
                offsets[slot] = offsets[last]
                slots[moved] = slot
            }
            offsets.removeLast()
        }
    }

    private mutating func add(_ partition: KafkaTopicPartition) -> Int {
        offsets.append(PartitionOffsets())
        slots[partition] = offsets.count - 1
        return offsets.count - 1
    }
}
