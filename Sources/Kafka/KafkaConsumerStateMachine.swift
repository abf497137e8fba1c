import DequeModule

/// The consumer's shared state: the hand-over buffer between the poll thread and the reader, the
/// assignment, and which partitions should be paused. Pure: every method returns what to do, and the
/// caller does it outside the lock.
struct KafkaConsumerStateMachine {
    typealias Waiter = CheckedContinuation<KafkaConsumerMessage?, any Error>

    enum Termination {
        case closed
        case failed(KafkaError)
    }

    /// Records are buffered up to `capacity`. A full buffer first holds the poll thread back for a
    /// moment (a reader that is only briefly behind costs nothing); if it stays full, every assigned
    /// partition is paused until the reader has drained it to `capacity / 2`.
    let capacity: Int
    /// The same in bytes (`KafkaConsumerMessage.byteCount`): a few large records fill it first.
    let byteCapacity: Int
    private var buffer: Deque<KafkaConsumerMessage> = []
    private(set) var bufferedBytes = 0
    private var waiter: Waiter?
    private var termination: Termination?
    private(set) var assigned: Set<KafkaTopicPartition> = []
    private var pausedByCaller: Set<KafkaTopicPartition> = []
    /// The buffer stayed full: everything is paused until the reader catches up.
    private(set) var pausedForFlow = false
    /// The poll thread waits for the reader to make room.
    private var pollerWaiting = false

    init(capacity: Int, byteCapacity: Int = .max) {
        self.capacity = max(capacity, 2)
        self.byteCapacity = max(byteCapacity, 1)
        self.wakeBatch = min(64, self.capacity / 2)
    }

    /// Free slots that wake a poller waiting for room.
    let wakeBatch: Int

    /// The partitions that should be paused right now.
    var desiredPaused: Set<KafkaTopicPartition> {
        pausedForFlow ? assigned : assigned.intersection(pausedByCaller)
    }

    var bufferedCount: Int { buffer.count }

    // MARK: poll thread

    enum PushAction: Equatable {
        /// In the buffer; `full`: the poll thread should stop polling for now.
        case buffered(full: Bool)
        /// The sequence has ended.
        case dropped
    }

    /// Buffers a record. A waiting reader is not resumed here but by `handOver()`, once per poll
    /// batch: resuming it per record cost both threads a futex wake-up and a thread switch per
    /// record whenever the reader was the faster side, a self-sustaining regime at about 60% of
    /// the rate (Benchmarks/README.md, "The consumer's two speeds").
    mutating func push(_ message: KafkaConsumerMessage) -> PushAction {
        guard termination == nil else { return .dropped }
        buffer.append(message)
        bufferedBytes += message.byteCount
        return .buffered(full: isFull)
    }

    /// After a poll batch: a waiting reader gets the first buffered record; the rest stay for its
    /// `take()`, which does not suspend.
    mutating func handOver() -> (Waiter, KafkaConsumerMessage)? {
        guard let waiter, let message = buffer.popFirst() else { return nil }
        self.waiter = nil
        bufferedBytes -= message.byteCount
        return (waiter, message)
    }

    /// What the poll thread should do before its next poll.
    enum SpaceAction {
        /// Poll: there is room, or the partitions are already paused (polling then only serves
        /// callbacks and the few records librdkafka had already queued).
        case poll
        /// Wait for the reader to free `wakeBatch` slots (it will signal).
        case wait
    }

    /// Full by count or by bytes.
    private var isFull: Bool { buffer.count >= capacity || bufferedBytes >= byteCapacity }

    mutating func checkSpace() -> SpaceAction {
        guard isFull, !pausedForFlow, termination == nil else { return .poll }
        pollerWaiting = true
        return .wait
    }

    /// The buffer stayed full for too long: pause everything. Returns whether the pause set changed.
    mutating func pauseForFlow() -> Bool {
        pollerWaiting = false
        guard isFull, !pausedForFlow else { return false }
        pausedForFlow = true
        return true
    }

    mutating func assign(_ partitions: [KafkaTopicPartition]) {
        assigned.formUnion(partitions)
    }

    /// Forgets revoked partitions, and drops their records not yet handed over: they were never seen
    /// by the reader, so their offsets are not committed and the next owner reads them again.
    /// Returns whether the desired pause set changed.
    mutating func revoke(_ partitions: [KafkaTopicPartition]) -> Bool {
        let revoked = Set(partitions)
        assigned.subtract(revoked)
        pausedByCaller.subtract(revoked)
        buffer.removeAll { revoked.contains($0.topicPartition) }
        bufferedBytes = buffer.reduce(0) { $0 + $1.byteCount }
        return releaseFlowPauseIfDrained()
    }

    /// Ends the sequence. Records not yet handed over are dropped (never seen, never committed).
    mutating func finish(_ termination: Termination) -> Waiter? {
        guard self.termination == nil else { return nil }
        self.termination = termination
        buffer.removeAll()
        bufferedBytes = 0
        pollerWaiting = false
        defer { waiter = nil }
        return waiter
    }

    // MARK: reader

    enum TakeAction {
        /// `wakePoller`: the poll thread is waiting for room and now has it.
        case message(KafkaConsumerMessage, pausesChanged: Bool, wakePoller: Bool)
        case finished(KafkaError?)
        /// Nothing yet; with `wait(_:)`, the waiter was stored and will be resumed by the poll thread.
        case empty
    }

    mutating func take() -> TakeAction {
        if let message = buffer.popFirst() {
            bufferedBytes -= message.byteCount
            // Woken once `wakeBatch` slots are free, not at the first: a poller woken per record
            // costs a futex wake-up and a thread switch per record while the reader is the slower
            // side. Not as late as half either: the poller must keep polling (rebalances and
            // heartbeats are served inside the poll) for any reader that keeps taking records.
            let wakePoller =
                pollerWaiting && buffer.count <= capacity - wakeBatch
                && bufferedBytes < byteCapacity - byteCapacity / 16
            if wakePoller { pollerWaiting = false }
            return .message(message, pausesChanged: releaseFlowPauseIfDrained(), wakePoller: wakePoller)
        }
        if let termination {
            if case .failed(let error) = termination { return .finished(error) }
            return .finished(nil)
        }
        return .empty
    }

    /// A buffered record, or `.empty` even when the sequence has ended (the next `take` reports that).
    mutating func takeBuffered() -> TakeAction {
        guard !buffer.isEmpty else { return .empty }
        return take()
    }

    mutating func wait(_ waiter: Waiter) -> TakeAction {
        let action = take()
        if case .empty = action {
            precondition(self.waiter == nil, "KafkaConsumer.messages has exactly one reader")
            self.waiter = waiter
        }
        return action
    }

    mutating func cancelWait() -> Waiter? {
        defer { waiter = nil }
        return waiter
    }

    // MARK: caller's pause and resume

    mutating func pause(_ partitions: [KafkaTopicPartition]) {
        pausedByCaller.formUnion(partitions)
    }

    mutating func resume(_ partitions: [KafkaTopicPartition]) {
        pausedByCaller.subtract(partitions)
    }

    private mutating func releaseFlowPauseIfDrained() -> Bool {
        guard pausedForFlow, buffer.count <= capacity / 2, bufferedBytes <= byteCapacity / 2 else { return false }
        pausedForFlow = false
        return true
    }
}
