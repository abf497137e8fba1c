import Kafka

/// What a partition's committed offset says when it is assigned: the offset, and the records above
/// it its last owner finished (the commit's metadata, or the progress topic's record).
struct KnownProgress: Sendable, Equatable {
    var committed: Int64
    var done: OffsetRanges
}

/// What this member finished in a partition it let go without storing it (a lost assignment, a
/// revocation whose commit gave up, events that finished after it): the tracker's last candidate and
/// where that lease began reading. Should the group give the partition back, those records are not
/// run again.
struct OwedProgress: Sendable, Equatable {
    var candidate: CommitCandidate
    var start: Int64
}

extension KnownProgress {
    /// A committed offset's metadata that could not be read (`CommitMetadata.decode`): ignored, every
    /// record from the offset on runs.
    struct Unreadable {
        var partition: KafkaTopicPartition
        var committed: Int64
        var error: any Error
    }

    /// What the committed offsets say: their metadata's done records, or, where the broker kept none,
    /// the progress topic's record written for that offset (`fromTopic`). Pure: the caller reads both
    /// and logs what is returned as unreadable.
    static func read(
        committed: [KafkaTopicPartition: KafkaTopicPartitionOffset], fromTopic: [KafkaTopicPartition: OffsetRanges]
    ) -> (known: [KafkaTopicPartition: KnownProgress], unreadable: [Unreadable]) {
        var known: [KafkaTopicPartition: KnownProgress] = [:]
        var unreadable: [Unreadable] = []
        for (partition, stored) in committed {
            var progress = KnownProgress(committed: stored.offset, done: OffsetRanges())
            if let text = stored.metadata {
                do {
                    progress.done = try CommitMetadata.decode(text, committed: stored.offset).done
                } catch {
                    unreadable.append(Unreadable(partition: partition, committed: stored.offset, error: error))
                }
            }
            if let done = fromTopic[partition] { progress.done = done }
            known[partition] = progress
        }
        return (known, unreadable)
    }

    /// The progress each assigned partition starts from: what was read back (`read`, after untrue
    /// records were refused), plus what this member finished there itself and could not store
    /// (`owed`).
    ///
    /// Owed progress counts only where the committed offset lies in what that lease read (a
    /// committed offset below its start means the partition was read from elsewhere since: a reset,
    /// a recreated topic, and those records are not the ones it finished). A partition with no
    /// committed offset at all (the lease ended before its first commit was stored) is read again
    /// from its start, where that lease began reading: all it finished counts, as if committed where
    /// it began.
    static func starting(
        _ partitions: [KafkaTopicPartition], committed: [KafkaTopicPartition: Int64],
        read: [KafkaTopicPartition: KnownProgress], owed: [KafkaTopicPartition: OwedProgress]
    ) -> [KafkaTopicPartition: KnownProgress] {
        var progress: [KafkaTopicPartition: KnownProgress] = [:]
        for partition in Set(partitions).union(committed.keys) {
            progress[partition] = start(committed: committed[partition], read: read[partition], owed: owed[partition])
        }
        return progress
    }

    /// One partition's (`starting`); nil where nothing is committed and nothing owed.
    static func start(committed offset: Int64?, read: KnownProgress?, owed: OwedProgress?) -> KnownProgress? {
        guard let offset else {
            guard let owed, owed.start >= 0 else { return nil }
            var done = owed.candidate.done
            if owed.candidate.offset > owed.start { done.insert(owed.start..<owed.candidate.offset) }
            return KnownProgress(committed: owed.start, done: done)
        }
        var known = read ?? KnownProgress(committed: offset, done: OffsetRanges())
        if let owed, offset >= owed.start {
            // Its done records count even where its offset is the committed one: an event still
            // in flight at the committed offset when the assignment was lost, and done records
            // above it that the last commit did not carry yet.
            if owed.candidate.offset > offset { known.done.insert(offset..<owed.candidate.offset) }
            for range in owed.candidate.done.ranges { known.done.insert(range) }
        }
        return known
    }
}
