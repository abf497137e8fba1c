import Kafka

/// The pipeline's shared state: which records are in flight (per partition, for commits) and how
/// many events are running (for backpressure), and who waits for what. Pure: every method returns
/// what to do, and the caller does it outside the lock.
///
/// Backpressure: at `maxInFlight` running events the reader stops and the input partitions are
/// paused; when half have finished, they resume.
struct PipelineStateMachine {
    typealias Waiter = CheckedContinuation<Void, Never>

    let maxInFlight: Int
    private(set) var tracker = OffsetTracker()
    /// Events between "read" and "done", whatever their partition's fate (a revoked partition's
    /// events still run to the end; they just no longer count for commits).
    private(set) var running = 0
    private(set) var paused = false
    private var reader: Waiter?
    private var drainWaiters: [(partitions: Set<KafkaTopicPartition>?, waiter: Waiter)] = []

    init(maxInFlight: Int) {
        self.maxInFlight = max(maxInFlight, 1)
    }

    // MARK: reader

    /// A record was read and is about to run. Returns true when this one fills the bound: pause now.
    mutating func admit(_ partition: KafkaTopicPartition, offset: Int64) -> Bool {
        tracker.start(partition, offset: offset)
        running += 1
        guard !paused, running >= maxInFlight else { return false }
        paused = true
        return true
    }

    /// Before reading the next record: wait while paused. Returns false when the waiter was stored
    /// (it is resumed when the pipeline resumes), true when the reader may go on.
    mutating func mayRead(_ waiter: Waiter) -> Bool {
        guard paused else { return true }
        precondition(reader == nil, "one reader")
        reader = waiter
        return false
    }

    // MARK: completion

    struct FinishAction {
        /// Resume the input partitions and the reader.
        var resume: Waiter?
        var resumeConsumer = false
        /// Revocations or a shutdown waiting for these events.
        var drained: [Waiter] = []
    }

    /// An event is done: its result (and dead letter) are acknowledged. `tracked` is false if its
    /// partition was revoked meanwhile (its offset no longer counts).
    mutating func finish(_ partition: KafkaTopicPartition, offset: Int64) -> FinishAction {
        tracker.finish(partition, offset: offset)
        running -= 1
        var action = FinishAction()
        if paused, running <= maxInFlight / 2 {
            paused = false
            action.resumeConsumer = true
            action.resume = reader
            reader = nil
        }
        var waiting: [(partitions: Set<KafkaTopicPartition>?, waiter: Waiter)] = []
        for entry in drainWaiters {
            if isDrained(entry.partitions) { action.drained.append(entry.waiter) } else { waiting.append(entry) }
        }
        drainWaiters = waiting
        return action
    }

    /// An event was abandoned (cancelled at shutdown): it no longer runs, but its offset stays in
    /// flight, so nothing at or after it in its partition is committed and it is read again.
    mutating func abandon(_ partition: KafkaTopicPartition, offset: Int64) -> FinishAction {
        running -= 1
        var action = FinishAction()
        var waiting: [(partitions: Set<KafkaTopicPartition>?, waiter: Waiter)] = []
        for entry in drainWaiters {
            if entry.partitions == nil && running == 0 {
                action.drained.append(entry.waiter)
            } else {
                waiting.append(entry)
            }
        }
        drainWaiters = waiting
        return action
    }

    // MARK: revocation and shutdown

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

    /// The partitions left this member: forget their offsets.
    mutating func forget(_ partitions: some Sequence<KafkaTopicPartition>) {
        tracker.remove(partitions)
    }

    mutating func markCommitted(_ offsets: [KafkaTopicPartitionOffset]) {
        tracker.markCommitted(offsets)
    }

    private func isDrained(_ partitions: Set<KafkaTopicPartition>?) -> Bool {
        guard let partitions else { return running == 0 }
        return tracker.inFlight(in: partitions) == 0
    }
}
