import Kafka
import Synchronization

/// One partition's tenure at this member: made when the group assigns the partition, ended when the
/// partition is gone for good (the revocation's drain bound passed, the assignment was lost, or
/// shutdown's deadline came). Every event carries its partition's lease; an event whose lease has
/// ended is abandoned at its next step (a retry, a throttle wait) instead of being pushed again,
/// because the partition's next owner reads it again (uncommitted) and pushes it itself.
///
/// A lease is also the identity of one assignment: a partition assigned away and back gets a new
/// lease, so that a record read under the old one is never admitted, finished or committed under
/// the new one.
package final class PartitionLease: Sendable {
    package let partition: KafkaTopicPartition?
    /// The consumer's tenure the partition was assigned in: records fetched before it
    /// (`KafkaConsumerMessage.tenure` below this) belong to an earlier tenure, not to this lease.
    package let tenure: UInt64
    private let active = Atomic<Bool>(true)

    /// - Parameter partition: `nil` for a lease that belongs to no partition (tests, one-off sends).
    package init(_ partition: KafkaTopicPartition? = nil, tenure: UInt64 = 0) {
        self.partition = partition
        self.tenure = tenure
    }

    /// False once the partition is gone: the event's work should stop at its next step.
    package var isActive: Bool { active.load(ordering: .acquiring) }

    func end() {
        active.store(false, ordering: .releasing)
    }
}
