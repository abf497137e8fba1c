import Kafka
import Synchronization

/// One partition's ownership at this member: made when the group assigns the partition, handed over
/// when the group takes it away (nothing of it is pushed any more; what is at APNs finishes and
/// counts), ended when the partition is gone for good (the revocation committed or gave up, the
/// assignment was lost, or shutdown's deadline came). Every event carries its partition's lease; an
/// event whose lease is no longer active is abandoned at its next step (a retry, a throttle wait)
/// instead of being pushed again, because the partition's next owner reads it again (uncommitted)
/// and pushes it itself.
///
/// A lease is also the identity of one assignment: a partition assigned away and back gets a new
/// lease, so that a record read under the old one is never admitted, finished or committed under
/// the new one.
package final class PartitionLease: Sendable {
    package let partition: KafkaTopicPartition?
    /// The consumer's tenure (its count of assignment changes) in which the partition was assigned:
    /// a record fetched before it (`KafkaConsumerMessage.tenure` below this) is not this lease's.
    package let assignedIn: UInt64
    /// 0: active; 1: handed over (no more pushes); 2: ended.
    private let phase = Atomic<UInt8>(0)

    /// - Parameter partition: `nil` for a lease that belongs to no partition (tests, one-off sends).
    package init(_ partition: KafkaTopicPartition? = nil, assignedIn: UInt64 = 0) {
        self.partition = partition
        self.assignedIn = assignedIn
    }

    /// False once the partition is handed over or gone: the event's work should stop at its next step.
    package var isActive: Bool { phase.load(ordering: .acquiring) == 0 }

    /// The group is taking the partition away: no event of it is pushed from now on.
    func handOver() {
        _ = phase.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing)
    }

    func end() {
        phase.store(2, ordering: .releasing)
    }
}
