import Kafka

/// What to commit for one partition: the offset (everything below it is done), the done records
/// above it (the commit's metadata), and the tracker's state it was taken at (`markCommitted`).
package struct CommitCandidate: Equatable, Sendable {
    package var partition: KafkaTopicPartition
    package var offset: Int64
    package var done: OffsetRanges
    var version: UInt64
    /// Which tracking of the partition it was taken from: a commit of a lease that ended does not
    /// mark the next one's as committed.
    var leaseNumber: UInt64 = 0

    /// The offset alone.
    var position: KafkaTopicPartitionOffset { KafkaTopicPartitionOffset(partition, offset: offset) }
}

/// Which consumed records are still in flight, per partition, and what can be committed.
///
/// At-least-once: an offset is committed only when every record below it in its partition is done,
/// i.e. its result event (and dead letter, if any) is acknowledged by Kafka. Events finish out of
/// order; the commit point is the lowest offset still in flight, and the done records above it are
/// committed too (as the offset's metadata), so that nobody runs them again.
struct OffsetTracker {
    /// Each tracked partition's offsets, at the position `slots` names. An array changed in place
    /// rather than a dictionary of values: changing a dictionary's value in place (`d[k]?.f()`) goes
    /// through an accessor that allocates its frame, twice for every event (start and finish).
    private var offsets: [PartitionOffsets] = []
    private var slots: [KafkaTopicPartition: Int] = [:]
    /// Which lease each slot tracks (a number per tracking, new at every assignment), and the next
    /// to hand out.
    private var leaseNumbers: [UInt64] = []
    private var nextLeaseNumber: UInt64 = 1

    /// Records in flight over all partitions.
    private(set) var inFlight = 0

    @discardableResult
    mutating func start(_ partition: KafkaTopicPartition, offset: Int64) -> PartitionOffsets.Start {
        let slot = slots[partition] ?? add(partition)
        let started = offsets[slot].start(offset)
        if started.runs { inFlight += 1 }
        return started
    }

    /// The partition starts from what its committed offset's metadata says is done above it, trusted
    /// while no more than `notDoneAllowed` records read inside it are not done.
    mutating func seed(
        _ partition: KafkaTopicPartition, committed offset: Int64, done: OffsetRanges, notDoneAllowed: Int64 = .max
    ) {
        let slot = slots[partition] ?? add(partition)
        offsets[slot].seed(committed: offset, done: done, notDoneAllowed: notDoneAllowed)
    }

    /// A record in flight is given up before it was pushed (a hand-over): not done, not waited for.
    @discardableResult
    mutating func abandon(_ partition: KafkaTopicPartition, offset: Int64) -> Bool {
        guard let slot = slots[partition], offsets[slot].abandon(offset) else { return false }
        inFlight -= 1
        return true
    }

    /// Returns false if the record is not tracked (its partition was revoked meanwhile).
    @discardableResult
    mutating func finish(_ partition: KafkaTopicPartition, offset: Int64) -> Bool {
        guard let slot = slots[partition], offsets[slot].finish(offset) else { return false }
        inFlight -= 1
        return true
    }

    /// The partition's committed offset as the broker has it, as far as its tracking knows.
    func lastStoredOffset(of partition: KafkaTopicPartition) -> Int64? {
        slots[partition].flatMap { offsets[$0].lastStored }
    }

    /// Where the partition's lease started reading, unless its position was reset since.
    func startOffset(of partition: KafkaTopicPartition) -> Int64? {
        slots[partition].flatMap { offsets[$0].startOffset }
    }

    func inFlight(in partition: KafkaTopicPartition) -> Int {
        slots[partition].map { offsets[$0].inFlight } ?? 0
    }

    func inFlight(in selection: some Sequence<KafkaTopicPartition>) -> Int {
        selection.reduce(0) { $0 + inFlight(in: $1) }
    }

    /// What changed since the last commit (the offset, or the done records above it), optionally
    /// only for some partitions.
    func commitCandidates(in selection: Set<KafkaTopicPartition>? = nil) -> [CommitCandidate] {
        slots.compactMap { partition, slot in
            guard selection?.contains(partition) ?? true, let candidate = offsets[slot].commitCandidate else {
                return nil
            }
            return CommitCandidate(
                partition: partition, offset: candidate.offset, done: candidate.done, version: candidate.version,
                leaseNumber: leaseNumbers[slot])
        }.sorted { $0.partition < $1.partition }
    }

    mutating func markCommitted(_ committed: [CommitCandidate]) {
        for candidate in committed {
            if let slot = slots[candidate.partition], leaseNumbers[slot] == candidate.leaseNumber {
                offsets[slot].markCommitted(candidate.offset, version: candidate.version)
            }
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
                leaseNumbers[slot] = leaseNumbers[last]
                slots[moved] = slot
            }
            offsets.removeLast()
            leaseNumbers.removeLast()
        }
    }

    private mutating func add(_ partition: KafkaTopicPartition) -> Int {
        offsets.append(PartitionOffsets())
        leaseNumbers.append(nextLeaseNumber)
        nextLeaseNumber += 1
        slots[partition] = offsets.count - 1
        return offsets.count - 1
    }
}
