/// Told when the group moves partitions to or from this member.
///
/// Both methods run while the consumer's poll thread waits for them, which is what lets a revocation
/// finish in-flight work and commit before the partitions go. So they must not wait for anything that
/// needs the poll thread: `KafkaConsumer.commit` is fine (it does not use it), `close()` is not.
/// They are bounded by `maxPollInterval`; past it the consumer logs an error and lets go anyway.
package protocol KafkaRebalanceHandler: Sendable {
    /// The partitions are now this member's. Reading starts at their committed offsets (or at
    /// `autoOffsetReset`) once this returns.
    ///
    /// `tenure` numbers this assignment: every record fetched in it has a `KafkaConsumerMessage.tenure`
    /// at least this high, and every record fetched before it (in a tenure that ended, however briefly
    /// ago, and even if a reader holds it still) a lower one. A partition lost and assigned back
    /// starts again at its committed offset, so a record of the old tenure still in a reader's hands
    /// is not the new tenure's to process or commit.
    func partitionsAssigned(_ partitions: [KafkaTopicPartition], tenure: UInt64) async

    /// The partitions are being taken away. Records of theirs not yet read are already dropped;
    /// commit what is finished before returning. `lost` means the group already gave them to another
    /// member (session timed out): commits for them will fail.
    func partitionsRevoked(_ partitions: [KafkaTopicPartition], lost: Bool) async
}
