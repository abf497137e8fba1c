import Kafka

extension WorkerPipeline.StateMachine {
    /// The partitions this member owns, each under its lease, and their records in flight.
    struct Ownership {
        /// Partitions owned now. A partition being revoked is no longer here, but keeps its entry in
        /// `leases` (and the tracker) until its revocation has committed.
        private(set) var owned: Set<KafkaTopicPartition> = []
        /// The lease of every partition the tracker holds (owned, or revoked and not yet forgotten).
        private(set) var leases: [KafkaTopicPartition: PartitionLease] = [:]
        private(set) var tracker = OffsetTracker()
        /// What this member finished in partitions it let go and did not store (`forget`), until the
        /// group gives them back (`takeOwed`).
        private(set) var owed: [KafkaTopicPartition: OwedProgress] = [:]

        /// New leases (assigned in the consumer's `tenure`) and fresh tracking for these partitions, each
        /// starting from what is known done above its committed offset (trusted while no more than
        /// `notDoneAllowed` records read inside it are not done); returns the leases they replace.
        mutating func assign(
            _ partitions: [KafkaTopicPartition], tenure: UInt64, progress: [KafkaTopicPartition: KnownProgress],
            notDoneAllowed: Int64 = .max
        ) -> [PartitionLease] {
            var ended: [PartitionLease] = []
            for partition in partitions {
                if let old = leases[partition] { ended.append(old) }
                leases[partition] = PartitionLease(partition, assignedIn: tenure)
                owned.insert(partition)
            }
            tracker.remove(partitions)
            for (partition, known) in progress where owned.contains(partition) {
                tracker.seed(
                    partition, committed: known.committed, done: known.done, notDoneAllowed: notDoneAllowed)
            }
            return ended
        }

        /// Returns the leases of the partitions that were owned, to hand over.
        mutating func revoke(_ partitions: some Sequence<KafkaTopicPartition>) -> [PartitionLease] {
            var handedOver: [PartitionLease] = []
            for partition in partitions where owned.remove(partition) != nil {
                if let lease = leases[partition] { handedOver.append(lease) }
            }
            return handedOver
        }

        /// Drops the partitions not owned again meanwhile, keeping what their leases finished and did
        /// not store as owed; returns their leases.
        mutating func forget(_ partitions: some Sequence<KafkaTopicPartition>) -> [PartitionLease] {
            var ended: [PartitionLease] = []
            var forgotten: Set<KafkaTopicPartition> = []
            for partition in partitions where !owned.contains(partition) {
                if let lease = leases.removeValue(forKey: partition) { ended.append(lease) }
                forgotten.insert(partition)
            }
            for candidate in tracker.commitCandidates(in: forgotten) {
                guard let start = tracker.startOffset(of: candidate.partition) else { continue }
                owed[candidate.partition] = OwedProgress(candidate: candidate, start: start)
            }
            tracker.remove(forgotten)
            return ended
        }

        /// What this member owes itself in these partitions, taken (each is given once).
        mutating func takeOwed(_ partitions: some Sequence<KafkaTopicPartition>) -> [KafkaTopicPartition: OwedProgress]
        {
            var taken: [KafkaTopicPartition: OwedProgress] = [:]
            for partition in partitions { taken[partition] = owed.removeValue(forKey: partition) }
            return taken
        }

        func lease(of partition: KafkaTopicPartition) -> PartitionLease? {
            owned.contains(partition) ? leases[partition] : nil
        }

        /// Tracks the record if its partition is owned under `lease` now; `nil` when it is not.
        ///
        /// Within a lease offsets only grow, except when librdkafka resets a partition's position
        /// (`auto.offset.reset` on an offset out of range, as when a topic is recreated): the
        /// tracker ignores such a lower offset and the record runs untracked, so that it still
        /// ends with a result.
        mutating func start(
            _ partition: KafkaTopicPartition, offset: Int64, lease: PartitionLease
        ) -> PartitionOffsets.Start? {
            guard owned.contains(partition), leases[partition] === lease else { return nil }
            return tracker.start(partition, offset: offset)
        }

        /// The record was given up before it was pushed again (its partition is being handed
        /// over): no longer waited for, and not done.
        mutating func abandon(_ partition: KafkaTopicPartition, offset: Int64, lease: PartitionLease) {
            if leases[partition] === lease { tracker.abandon(partition, offset: offset) }
        }

        /// The record is done; it counts only if its partition is still tracked under `lease`.
        mutating func finish(_ partition: KafkaTopicPartition, offset: Int64, lease: PartitionLease) {
            if leases[partition] === lease { tracker.finish(partition, offset: offset) }
        }

        func commitCandidates(in selection: Set<KafkaTopicPartition>?) -> [CommitCandidate] {
            tracker.commitCandidates(in: selection ?? owned)
        }

        mutating func markCommitted(_ committed: [CommitCandidate]) {
            tracker.markCommitted(committed)
        }
    }
}
