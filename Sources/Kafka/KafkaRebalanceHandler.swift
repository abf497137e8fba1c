/// Told when the group moves partitions to or from this member.
///
/// Both methods run while the consumer's poll thread waits for them, which is what lets a revocation
/// finish in-flight work and commit before the partitions go. So they must not wait for anything that
/// needs the poll thread: `KafkaConsumer.commit` is fine (it does not use it), `close()` is not.
/// They are bounded by `maxPollInterval`; past it the consumer logs an error and lets go anyway.
package protocol KafkaRebalanceHandler: Sendable {
    /// The partitions are now this member's. Reading starts at their committed offsets (or at
    /// `autoOffsetReset`) once this returns.
    func partitionsAssigned(_ partitions: [KafkaTopicPartition]) async

    /// The partitions are being taken away. Records of theirs not yet read are already dropped;
    /// commit what is finished before returning. `lost` means the group already gave them to another
    /// member (session timed out): commits for them will fail.
    func partitionsRevoked(_ partitions: [KafkaTopicPartition], lost: Bool) async
}
