import Kafka

/// What an assignment starts each partition from: what its committed offset says (`KnownProgress.read`),
/// refused where it cannot be true (`DoneRecordBounds`), plus what this member finished there itself and
/// could not store (`OwedProgress`). Pure: the assignment handler reads the committed offsets, learns the
/// partitions' ends and logs what was refused; the deterministic simulation drives the same steps.
struct StartingProgress {
    /// Done records refused as untrue, for the caller to count and log.
    struct Refused: Equatable {
        var partition: KafkaTopicPartition
        var known: KnownProgress
        var refusal: DoneRecordBounds.Refusal
    }

    /// The progress each partition starts from, and what was refused on the way.
    struct Decision: Equatable {
        var progress: [KafkaTopicPartition: KnownProgress]
        var refused: [Refused]
    }

    let partitions: [KafkaTopicPartition]
    let committed: [KafkaTopicPartition: Int64]
    let read: [KafkaTopicPartition: KnownProgress]
    let owed: [KafkaTopicPartition: OwedProgress]
    let bounds: DoneRecordBounds

    /// The highest done offset of each partition whose end is needed to check its done records.
    var tops: [KafkaTopicPartition: Int64] {
        read.compactMapValues { $0.done.ranges.last?.upperBound }
    }

    /// The progress to start from, given the ends learnt (a partition absent from `ends` is checked
    /// without one).
    func decided(ends: [KafkaTopicPartition: Int64]) -> Decision {
        var checked = read
        var refused: [Refused] = []
        for partition in read.keys.sorted() {
            guard let known = read[partition], let refusal = bounds.refusal(of: known, end: ends[partition]) else {
                continue
            }
            refused.append(Refused(partition: partition, known: known, refusal: refusal))
            checked[partition]?.done = OffsetRanges()
        }
        let progress = KnownProgress.starting(partitions, committed: committed, read: checked, owed: owed)
        return Decision(progress: progress, refused: refused)
    }
}
