import DequeModule

/// The consumer's shared state: the hand-over between the poll thread and the reader, the
/// assignment, and which partitions should be paused. Pure: every method returns what to do, and the
/// caller does it outside the lock.
///
/// The hand-over is one `State`: open, with records buffered *or* the reader waiting (never both),
/// and the poll thread polling, waiting for room *or* holding everything paused (one of the three);
/// or finished, with nothing buffered and nobody waiting. The assignment and the caller's pauses
/// outlive the hand-over (a rebalance may still arrive while the consumer closes), so they are kept
/// beside it.
struct KafkaConsumerStateMachine {
    typealias Waiter = CheckedContinuation<KafkaConsumerMessage?, any Error>

    enum Termination {
        case closed
        case failed(KafkaError)
    }

    /// Between the poll thread and the reader.
    enum HandOver {
        /// Records not yet taken (possibly none), and their bytes.
        case buffered(Deque<KafkaConsumerMessage>, bytes: Int)
        /// The reader waits for the next record; nothing is buffered.
        case readerWaiting(Waiter)
    }

    /// The poll thread and a full buffer.
    enum Flow: Equatable {
        /// It polls: there is room, or it has not looked yet.
        case polling
        /// It waits for the reader to free `wakeBatch` slots (the reader signals).
        case pollerWaiting
        /// The buffer stayed full: every assigned partition is paused until the reader has drained it
        /// to half.
        case paused
    }

    enum State {
        case open(HandOver, Flow)
        /// Ended: records not yet handed over were dropped (never seen, never committed).
        case finished(Termination)
        /// Only inside a method that changes the buffer in place, so the buffer is never copied.
        case modifying
    }

    /// Records are buffered up to `capacity`. A full buffer first holds the poll thread back for a
    /// moment (a reader that is only briefly behind costs nothing); if it stays full, every assigned
    /// partition is paused until the reader has drained it to `capacity / 2`.
    let capacity: Int
    /// The same in bytes (`KafkaConsumerMessage.byteCount`): a few large records fill it first.
    let byteCapacity: Int
    /// Free slots that wake a poller waiting for room.
    let wakeBatch: Int
    private var state: State = .open(.buffered([], bytes: 0), .polling)
    private(set) var assigned: Set<KafkaTopicPartition> = []
    private var pausedByCaller: Set<KafkaTopicPartition> = []

    init(capacity: Int, byteCapacity: Int = .max) {
        self.capacity = max(capacity, 2)
        self.byteCapacity = max(byteCapacity, 1)
        self.wakeBatch = min(64, self.capacity / 2)
    }

    /// The buffer stayed full: everything is paused until the reader catches up.
    var pausedForFlow: Bool {
        if case .open(_, .paused) = state { return true }
        return false
    }

    /// The partitions that should be paused right now.
    var desiredPaused: Set<KafkaTopicPartition> {
        pausedForFlow ? assigned : assigned.intersection(pausedByCaller)
    }

    var bufferedCount: Int {
        if case .open(.buffered(let buffer, _), _) = state { return buffer.count }
        return 0
    }

    var bufferedBytes: Int {
        if case .open(.buffered(_, let bytes), _) = state { return bytes }
        return 0
    }

    /// Full by count or by bytes.
    private func isFull(count: Int, bytes: Int) -> Bool {
        count >= capacity || bytes >= byteCapacity
    }

    // MARK: poll thread

    enum PushAction {
        case deliver(Waiter, KafkaConsumerMessage)
        case buffered
        case dropped
    }

    mutating func push(_ message: KafkaConsumerMessage) -> PushAction {
        switch state {
        case .open(.buffered(var buffer, let bytes), let flow):
            state = .modifying
            buffer.append(message)
            state = .open(.buffered(buffer, bytes: bytes + message.byteCount), flow)
            return .buffered
        case .open(.readerWaiting(let waiter), let flow):
            state = .open(.buffered([], bytes: 0), flow)
            return .deliver(waiter, message)
        case .finished:
            return .dropped
        case .modifying:
            preconditionFailure("KafkaConsumerStateMachine re-entered")
        }
    }

    /// What the poll thread should do before its next poll.
    enum SpaceAction {
        /// Poll: there is room, or the partitions are already paused (polling then only serves
        /// callbacks and the few records librdkafka had already queued).
        case poll
        /// Wait for the reader to free `wakeBatch` slots (it will signal).
        case wait
    }

    mutating func checkSpace() -> SpaceAction {
        guard case .open(.buffered(let buffer, let bytes), let flow) = state, flow != .paused,
            isFull(count: buffer.count, bytes: bytes)
        else { return .poll }
        if flow != .pollerWaiting { state = .open(.buffered(buffer, bytes: bytes), .pollerWaiting) }
        return .wait
    }

    /// The buffer stayed full for too long: pause everything. Returns whether the pause set changed.
    mutating func pauseForFlow() -> Bool {
        switch state {
        case .open(.buffered(let buffer, let bytes), let flow) where flow != .paused:
            let full = isFull(count: buffer.count, bytes: bytes)
            if full || flow == .pollerWaiting {
                state = .open(.buffered(buffer, bytes: bytes), full ? .paused : .polling)
            }
            return full
        case .open(.readerWaiting(let waiter), .pollerWaiting):
            state = .open(.readerWaiting(waiter), .polling)
            return false
        default:
            return false
        }
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
        if case .open(.buffered(var buffer, _), let flow) = state {
            state = .modifying
            buffer.removeAll { revoked.contains($0.topicPartition) }
            state = .open(.buffered(buffer, bytes: buffer.reduce(0) { $0 + $1.byteCount }), flow)
        }
        return releaseFlowPauseIfDrained()
    }

    /// Ends the sequence. Records not yet handed over are dropped (never seen, never committed).
    /// Returns the waiting reader, to be told.
    mutating func finish(_ termination: Termination) -> Waiter? {
        switch state {
        case .open(.readerWaiting(let waiter), _):
            state = .finished(termination)
            return waiter
        case .open(.buffered, _):
            state = .finished(termination)
            return nil
        case .finished:
            return nil
        case .modifying:
            preconditionFailure("KafkaConsumerStateMachine re-entered")
        }
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
        switch state {
        case .open(.buffered(var buffer, let bytes), var flow):
            guard !buffer.isEmpty else { return .empty }
            state = .modifying
            let message = buffer.removeFirst()
            let left = bytes - message.byteCount
            // Woken once `wakeBatch` slots are free, not at the first: a poller woken per record
            // costs a futex wake-up and a thread switch per record while the reader is the slower
            // side. Not as late as half either: the poller must keep polling (rebalances and
            // heartbeats are served inside the poll) for any reader that keeps taking records.
            let wakePoller =
                flow == .pollerWaiting && buffer.count <= capacity - wakeBatch
                && left < byteCapacity - byteCapacity / 16
            let pausesChanged = flow == .paused && buffer.count <= capacity / 2 && left <= byteCapacity / 2
            if wakePoller || pausesChanged { flow = .polling }
            state = .open(.buffered(buffer, bytes: left), flow)
            return .message(message, pausesChanged: pausesChanged, wakePoller: wakePoller)
        case .open(.readerWaiting, _):
            return .empty
        case .finished(.closed):
            return .finished(nil)
        case .finished(.failed(let error)):
            return .finished(error)
        case .modifying:
            preconditionFailure("KafkaConsumerStateMachine re-entered")
        }
    }

    /// A buffered record, or `.empty` even when the sequence has ended (the next `take` reports that).
    mutating func takeBuffered() -> TakeAction {
        guard bufferedCount > 0 else { return .empty }
        return take()
    }

    mutating func wait(_ waiter: Waiter) -> TakeAction {
        let action = take()
        if case .empty = action {
            guard case .open(.buffered(let buffer, _), let flow) = state, buffer.isEmpty else {
                preconditionFailure("KafkaConsumer.messages has exactly one reader")
            }
            state = .open(.readerWaiting(waiter), flow)
        }
        return action
    }

    mutating func cancelWait() -> Waiter? {
        guard case .open(.readerWaiting(let waiter), let flow) = state else { return nil }
        state = .open(.buffered([], bytes: 0), flow)
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
        switch state {
        case .open(.buffered(let buffer, let bytes), .paused):
            guard buffer.count <= capacity / 2, bytes <= byteCapacity / 2 else { return false }
            state = .open(.buffered(buffer, bytes: bytes), .polling)
            return true
        case .open(.readerWaiting(let waiter), .paused):
            state = .open(.readerWaiting(waiter), .polling)
            return true
        default:
            return false
        }
    }
}
