import Kafka

/// The pipeline's shared state: its phase (running, or stopping with a deadline), the partitions
/// this member owns (each with its lease), which records are in flight (per partition, for
/// commits), how many events run (for backpressure), which output topics refuse every record, and
/// who waits for what. Pure: every method returns what to do, and the caller does it outside the lock.
///
/// Input stops (the reader waits, the consumer's partitions pause) while any of these holds:
/// `maxInFlight` events, or `maxInFlightBytes` of their records, are running (until both are down
/// to half), or an output topic refuses every record (until one is stored there again). While
/// stopping, the reader never waits and admits nothing.
struct PipelineStateMachine {
    typealias Waiter = CheckedContinuation<Void, Never>

    enum Phase: Equatable {
        case running
        /// Shutdown began; everything must be done by `deadline`.
        case stopping(deadline: ContinuousClock.Instant)
    }

    let maxInFlight: Int
    /// The bound in bytes of the running events' records (`KafkaConsumerMessage.byteCount`).
    let maxInFlightBytes: Int
    private(set) var phase: Phase = .running
    private(set) var tracker = OffsetTracker()
    /// Partitions owned now. A partition being revoked is no longer here, but keeps its entry in
    /// `leases` (and the tracker) until its revocation has committed.
    private(set) var owned: Set<KafkaTopicPartition> = []
    /// The lease of every partition the tracker holds (owned, or revoked and not yet forgotten).
    private var leases: [KafkaTopicPartition: PartitionLease] = [:]
    /// Events between "read" and "done", whatever their partition's fate (a revoked partition's
    /// events run to the end or to their next step; they just no longer count for commits).
    private(set) var running = 0
    /// The running events' record bytes.
    private(set) var runningBytes = 0
    /// `maxInFlight` was reached and not yet drained to half.
    private(set) var atBound = false
    /// Output topics whose every record is refused (no such topic, not authorized), since when.
    private(set) var blockedTopics: [String: ContinuousClock.Instant] = [:]
    private var reader: Waiter?
    private var drainWaiters: [(partitions: Set<KafkaTopicPartition>?, waiter: Waiter)] = []

    init(maxInFlight: Int, maxInFlightBytes: Int = .max) {
        self.maxInFlight = max(maxInFlight, 1)
        self.maxInFlightBytes = max(maxInFlightBytes, 1)
    }

    /// Input is held: the reader waits and the consumer's partitions are paused.
    var paused: Bool { atBound || !blockedTopics.isEmpty }

    var isStopping: Bool { phase != .running }

    // MARK: assignment

    /// The group gave these partitions to this member: each gets a new lease and fresh tracking
    /// (whatever an earlier tenure left is no longer this member's to commit). Returns the leases
    /// that ended (a partition assigned again while its old revocation had not finished).
    mutating func assign(_ partitions: [KafkaTopicPartition]) -> [PartitionLease] {
        var ended: [PartitionLease] = []
        for partition in partitions {
            if let old = leases[partition] { ended.append(old) }
            leases[partition] = PartitionLease(partition)
            owned.insert(partition)
        }
        tracker.remove(partitions)
        return ended
    }

    /// The group takes these partitions away: nothing more of them is admitted from now on. Their
    /// running events go on (the revocation waits for them, bounded) and their offsets stay tracked
    /// until `forget`.
    mutating func revoke(_ partitions: some Sequence<KafkaTopicPartition>) {
        owned.subtract(partitions)
    }

    /// The revocation is over (committed, or given up): forget the partitions' offsets and end their
    /// leases, so that their events still waiting for a retry are abandoned. A partition owned again
    /// meanwhile (a new lease) is left alone. Returns the ended leases.
    mutating func forget(_ partitions: some Sequence<KafkaTopicPartition>) -> [PartitionLease] {
        var ended: [PartitionLease] = []
        var forgotten: [KafkaTopicPartition] = []
        for partition in partitions where !owned.contains(partition) {
            if let lease = leases.removeValue(forKey: partition) { ended.append(lease) }
            forgotten.append(partition)
        }
        tracker.remove(forgotten)
        return ended
    }

    /// The lease a record of this partition would be admitted under now, if the partition is owned.
    func lease(of partition: KafkaTopicPartition) -> PartitionLease? {
        owned.contains(partition) ? leases[partition] : nil
    }

    // MARK: reader

    enum AdmitAction {
        /// Run it; `pause`: this one fills the bound, pause the consumer now.
        case run(pause: Bool)
        /// Drop it unread: its partition is no longer owned under the lease it was read under, or
        /// the pipeline is stopping. It stays uncommitted; its partition's owner reads it again.
        case skip
    }

    /// A record read under `lease` is about to run. Checked after every wait of the reader, since
    /// the partition may have been revoked (and even assigned back) meanwhile.
    mutating func admit(
        _ partition: KafkaTopicPartition, offset: Int64, lease: PartitionLease, bytes: Int = 0
    ) -> AdmitAction {
        guard phase == .running, owned.contains(partition), leases[partition] === lease else { return .skip }
        tracker.start(partition, offset: offset)
        running += 1
        runningBytes += bytes
        guard running >= maxInFlight || runningBytes >= maxInFlightBytes, !atBound else { return .run(pause: false) }
        let wasPaused = paused
        atBound = true
        return .run(pause: !wasPaused)
    }

    /// Before reading the next record: wait while paused. Returns false when the waiter was stored
    /// (it is resumed when input resumes or shutdown begins), true when the reader may go on.
    mutating func mayRead(_ waiter: Waiter) -> Bool {
        guard paused, phase == .running else { return true }
        precondition(reader == nil, "one reader")
        reader = waiter
        return false
    }

    // MARK: completion

    struct FinishAction {
        /// Resume the reader.
        var resume: Waiter?
        /// Resume the consumer's partitions.
        var resumeConsumer = false
        /// Revocations or a shutdown waiting for these events.
        var drained: [Waiter] = []
    }

    /// An event is done: its result (and dead letter) are acknowledged. Its offset counts only if
    /// its partition is still tracked under the lease it was admitted with.
    mutating func finish(
        _ partition: KafkaTopicPartition, offset: Int64, lease: PartitionLease, bytes: Int = 0
    ) -> FinishAction {
        if leases[partition] === lease { tracker.finish(partition, offset: offset) }
        return ended(bytes: bytes)
    }

    /// An event was abandoned (its lease ended, or shutdown cancelled its wait): it no longer runs,
    /// but its offset stays in flight, so nothing at or after it in its partition is committed and
    /// it is read again.
    mutating func abandon(bytes: Int = 0) -> FinishAction {
        ended(bytes: bytes)
    }

    private mutating func ended(bytes: Int) -> FinishAction {
        running -= 1
        runningBytes -= bytes
        var action = FinishAction()
        if atBound, running <= maxInFlight / 2, runningBytes <= maxInFlightBytes / 2 {
            atBound = false
            action = resumeIfUnpaused(action)
        }
        var waiting: [(partitions: Set<KafkaTopicPartition>?, waiter: Waiter)] = []
        for entry in drainWaiters {
            if isDrained(entry.partitions) { action.drained.append(entry.waiter) } else { waiting.append(entry) }
        }
        drainWaiters = waiting
        return action
    }

    private mutating func resumeIfUnpaused(_ action: FinishAction) -> FinishAction {
        guard !paused else { return action }
        var action = action
        action.resumeConsumer = true
        action.resume = reader
        reader = nil
        return action
    }

    // MARK: output topics

    /// Every record to `topic` is refused. Returns true when this pauses input.
    mutating func block(_ topic: String, now: ContinuousClock.Instant) -> Bool {
        guard blockedTopics[topic] == nil else { return false }
        let wasPaused = paused
        blockedTopics[topic] = now
        return !wasPaused
    }

    /// A record was stored in `topic` again: what to resume, if this unpaused input.
    mutating func unblock(_ topic: String) -> FinishAction {
        guard blockedTopics.removeValue(forKey: topic) != nil else { return FinishAction() }
        return resumeIfUnpaused(FinishAction())
    }

    /// The topic that has refused every record for longer than `limit`, if any.
    func blockedLongest(now: ContinuousClock.Instant, limit: Duration) -> (topic: String, since: Duration)? {
        guard let (topic, since) = blockedTopics.min(by: { $0.value < $1.value }), now - since > limit else {
            return nil
        }
        return (topic, now - since)
    }

    // MARK: shutdown

    /// Shutdown began: nothing more is admitted, and a waiting reader goes on (to see the end of
    /// its sequence). Returns the reader to resume, or nil if shutdown had begun already.
    mutating func beginStopping(deadline: ContinuousClock.Instant) -> (began: Bool, reader: Waiter?) {
        guard phase == .running else { return (false, nil) }
        phase = .stopping(deadline: deadline)
        defer { reader = nil }
        return (true, reader)
    }

    /// Every lease held: at shutdown's drain bound the caller ends them all, so that what still
    /// waits for a retry is abandoned.
    var allLeases: [PartitionLease] { Array(leases.values) }

    // MARK: drains and commits

    /// Waits until no event of these partitions (all events, for `nil`) is in flight. Returns false
    /// when the waiter was stored, true when already drained.
    mutating func waitForDrain(of partitions: Set<KafkaTopicPartition>?, _ waiter: Waiter) -> Bool {
        if isDrained(partitions) { return true }
        drainWaiters.append((partitions, waiter))
        return false
    }

    /// Gives up waiting (timeout): the stored waiter, to resume.
    mutating func cancelDrainWait(_ matches: (Set<KafkaTopicPartition>?) -> Bool) -> [Waiter] {
        var cancelled: [Waiter] = []
        drainWaiters.removeAll { entry in
            guard matches(entry.partitions) else { return false }
            cancelled.append(entry.waiter)
            return true
        }
        return cancelled
    }

    /// What to commit: for a revocation its partitions, periodically only the partitions owned now
    /// (a partition being revoked is committed by its revocation, and only there).
    func commitCandidates(in selection: Set<KafkaTopicPartition>?) -> [KafkaTopicPartitionOffset] {
        tracker.commitCandidates(in: selection ?? owned)
    }

    mutating func markCommitted(_ offsets: [KafkaTopicPartitionOffset]) {
        tracker.markCommitted(offsets)
    }

    private func isDrained(_ partitions: Set<KafkaTopicPartition>?) -> Bool {
        guard let partitions else { return running == 0 }
        return tracker.inFlight(in: partitions) == 0
    }
}
