import Kafka

/// What an assignment starts each partition from: what its committed offset says (`KnownProgress.read`)
/// plus what this member finished there itself and could not store (`OwedProgress`), refused where it
/// cannot be true (`DoneRecordBounds`). Owed progress is checked as well: a topic deleted and recreated
/// loses its committed offsets, and what this member finished in its earlier life would otherwise name
/// the new records done. A partition whose end was not learnt (in the assignment's budget) cannot be
/// checked: it starts from its committed offset alone. Pure: the assignment handler reads the committed
/// offsets, learns the partitions' ends (`ProgressLearning`) and logs what was refused; the
/// deterministic simulation drives the same steps.
struct StartingProgress {
    /// Done records refused as untrue, for the caller to count and log.
    struct Refused: Equatable {
        var partition: KafkaTopicPartition
        var known: KnownProgress
        var refusal: DoneRecordBounds.Refusal
        /// What this member owed itself made them untrue (what was read back alone is kept).
        var owed: Bool
        /// The partition's end they were checked against.
        var end: Int64
    }

    /// The progress each partition starts from, and what was refused on the way.
    struct Decision: Equatable {
        var progress: [KafkaTopicPartition: KnownProgress]
        var refused: [Refused]
        /// Partitions with done records (read back or owed) whose end was not learnt: they start from
        /// their committed offset alone.
        var unchecked: [KafkaTopicPartition]
    }

    let partitions: [KafkaTopicPartition]
    let committed: [KafkaTopicPartition: Int64]
    let read: [KafkaTopicPartition: KnownProgress]
    let owed: [KafkaTopicPartition: OwedProgress]
    let bounds: DoneRecordBounds

    /// The highest done offset of each partition whose end is needed to check its done records,
    /// read back or owed.
    var tops: [KafkaTopicPartition: Int64] {
        KnownProgress.starting(partitions, committed: committed, read: read, owed: owed)
            .compactMapValues { $0.done.ranges.last?.upperBound }
    }

    /// The progress to start from, given the ends learnt so far. What was read back is checked alone
    /// first (untrue, it is dropped whatever this member owes), then with the owed progress merged in
    /// (untrue, the owed part is dropped).
    func decided(ends: [KafkaTopicPartition: Int64]) -> Decision {
        var progress: [KafkaTopicPartition: KnownProgress] = [:]
        var refused: [Refused] = []
        var unchecked: [KafkaTopicPartition] = []
        for partition in Set(partitions).union(committed.keys).sorted() {
            let all = KnownProgress.start(committed: committed[partition], read: read[partition], owed: owed[partition])
            guard let all, !all.done.isEmpty else {
                progress[partition] = all
                continue
            }
            guard let end = ends[partition] else {
                unchecked.append(partition)
                progress[partition] = committed[partition].map { KnownProgress(committed: $0, done: OffsetRanges()) }
                continue
            }
            var checked = read[partition]
            if let known = checked, let refusal = bounds.refusal(of: known, end: end) {
                refused.append(Refused(partition: partition, known: known, refusal: refusal, owed: false, end: end))
                checked?.done = OffsetRanges()
            }
            let alone = KnownProgress.start(committed: committed[partition], read: checked, owed: nil)
            let merged = KnownProgress.start(
                committed: committed[partition], read: checked, owed: owed[partition])
            if let merged, merged != alone, let refusal = bounds.refusal(of: merged, end: end) {
                refused.append(Refused(partition: partition, known: merged, refusal: refusal, owed: true, end: end))
                progress[partition] = alone
            } else {
                progress[partition] = merged
            }
        }
        return Decision(progress: progress, refused: refused, unchecked: unchecked)
    }
}
