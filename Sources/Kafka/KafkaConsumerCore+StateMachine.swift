import DequeModule

extension KafkaConsumerCore {
    /// The consumer's shared state: the hand-over buffer between the poll thread and the reader, the
    /// assignment, and which partitions should be paused. Pure: every method returns what to do, and the
    /// caller does it outside the lock.
    struct StateMachine {
        typealias Waiter = CheckedContinuation<KafkaConsumerMessage?, any Error>

        enum Termination {
            case closed
            case failed(KafkaError)
        }

        /// What the poll thread does about the buffer's room.
        enum Flow: Equatable {
            /// Polls: there is room, or nobody has noticed yet that there is none.
            case polling
            /// Waits for the reader to free `wakeBatch` slots (the reader signals it).
            case pollerWaiting
            /// The buffer stayed full: every assigned partition is paused until the reader has drained
            /// it to half; polling goes on for callbacks.
            case paused
        }

        /// Whether the sequence runs, and who waits for whom while it does. A reader waits only on an
        /// empty buffer; records join the buffer beside a waiting reader only within one poll batch,
        /// until `handOver()`. Finished: nothing buffered, nobody waiting, every later record dropped.
        enum Phase {
            case open(reader: Waiter?, flow: Flow)
            case finished(Termination)
        }

        /// Records are buffered up to `capacity`. A full buffer first keeps the poll thread waiting for a
        /// moment (a reader that is only briefly behind costs nothing); if it stays full, every assigned
        /// partition is paused until the reader has drained it to `capacity / 2`.
        let capacity: Int
        /// The same in bytes (`KafkaConsumerMessage.byteCount`): a few large records fill it first.
        let byteCapacity: Int
        /// Free slots that wake a poller waiting for room.
        let wakeBatch: Int
        private var phase: Phase = .open(reader: nil, flow: .polling)
        /// The hand-over buffer, empty once finished. Beside `phase`, not inside it: the enum form with
        /// the buffer in `open` measured 7% slower on the consumer's hot path (Benchmarks/archive/2026-11.md,
        /// "The consumer's two speeds (removed)").
        private var buffer: Deque<KafkaConsumerMessage> = []
        private(set) var bufferedBytes = 0
        /// The assignment and the caller's pauses outlive the sequence: a closing consumer still
        /// revokes its partitions.
        private(set) var assigned: Set<KafkaTopicPartition> = []
        /// Partitions paused by `pause(_:)`, kept apart from the pause of everything for a full buffer.
        private var callerPauses: Set<KafkaTopicPartition> = []
        /// Grows at every change of the assignment (an assignment or a revocation); each record is
        /// stamped with it as it is buffered (`KafkaConsumerMessage.tenure`). The rebalance callbacks
        /// and the buffering both run on the poll thread, so a record's stamp says which tenure of its
        /// partition fetched it.
        private(set) var tenure: UInt64 = 0

        /// The poll thread's life, apart from the sequence's: the sequence may end (a fatal error)
        /// while the thread still runs, and the thread ends only after leaving the group.
        enum PollThread {
            /// Running; `closeWaiters` wait for it to have left the group (`close()`).
            case running(closeWaiters: [CheckedContinuation<Void, Never>])
            case stopped
        }

        private var pollThread = PollThread.running(closeWaiters: [])

        init(capacity: Int, byteCapacity: Int = .max) {
            self.capacity = max(capacity, 2)
            self.byteCapacity = max(byteCapacity, 1)
            self.wakeBatch = min(64, self.capacity / 2)
        }

        /// The buffer stayed full: everything is paused until the reader catches up.
        var pausedForFlow: Bool {
            if case .open(_, .paused) = phase { return true }
            return false
        }

        /// The partitions that should be paused right now.
        var desiredPauses: Set<KafkaTopicPartition> {
            pausedForFlow ? assigned : assigned.intersection(callerPauses)
        }

        var bufferedCount: Int { buffer.count }

        /// `close()` waits for the poll thread to stop. Returns true when it has stopped already (resume
        /// the waiter now); otherwise the waiter is kept until `pollThreadStopped()`.
        mutating func waitForPollThread(_ waiter: CheckedContinuation<Void, Never>) -> Bool {
            guard case .running(var waiters) = pollThread else { return true }
            waiters.append(waiter)
            pollThread = .running(closeWaiters: waiters)
            return false
        }

        /// The poll thread left the group and ends. Returns the `close()` callers to resume.
        mutating func pollThreadStopped() -> [CheckedContinuation<Void, Never>] {
            guard case .running(let waiters) = pollThread else { return [] }
            pollThread = .stopped
            return waiters
        }

        /// Sets the flow, keeping the reader (no-op once finished).
        private mutating func setFlow(_ flow: Flow) {
            guard case .open(let reader, _) = phase else { return }
            phase = .open(reader: reader, flow: flow)
        }

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
        /// the rate (Benchmarks/archive/2026-11.md, "The consumer's two speeds (removed)").
        mutating func push(_ message: KafkaConsumerMessage) -> PushAction {
            guard case .open = phase else { return .dropped }
            var message = message
            message.tenure = tenure
            buffer.append(message)
            bufferedBytes += message.byteCount
            return .buffered(full: isFull)
        }

        /// After a poll batch: a waiting reader gets the first buffered record; the rest stay for its
        /// `take()`, which does not suspend.
        mutating func handOver() -> (Waiter, KafkaConsumerMessage)? {
            guard case .open(let reader?, let flow) = phase, let message = buffer.popFirst() else { return nil }
            phase = .open(reader: nil, flow: flow)
            bufferedBytes -= message.byteCount
            return (reader, message)
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
            guard isFull, case .open(_, let flow) = phase, flow != .paused else { return .poll }
            setFlow(.pollerWaiting)
            return .wait
        }

        /// The buffer stayed full for too long: pause everything. Returns whether the pause set changed.
        mutating func pauseForFlow() -> Bool {
            guard case .open(_, let flow) = phase else { return false }
            guard isFull else {
                setFlow(.polling)
                return false
            }
            guard flow != .paused else { return false }
            setFlow(.paused)
            return true
        }

        /// Returns the new assignment's tenure.
        @discardableResult
        mutating func assign(_ partitions: [KafkaTopicPartition]) -> UInt64 {
            tenure += 1
            assigned.formUnion(partitions)
            return tenure
        }

        /// Forgets revoked partitions, and drops their records not yet handed over: they were never seen
        /// by the reader, so their offsets are not committed and the next owner reads them again.
        /// Returns whether the desired pause set changed.
        mutating func revoke(_ partitions: [KafkaTopicPartition]) -> Bool {
            let revoked = Set(partitions)
            tenure += 1
            assigned.subtract(revoked)
            callerPauses.subtract(revoked)
            buffer.removeAll { revoked.contains($0.topicPartition) }
            bufferedBytes = buffer.reduce(0) { $0 + $1.byteCount }
            return releaseFlowPauseIfDrained()
        }

        /// Ends the sequence. Records not yet handed over are dropped (never seen, never committed).
        /// Returns the waiting reader, to be resumed with the end.
        mutating func finish(_ termination: Termination) -> Waiter? {
            guard case .open(let reader, _) = phase else { return nil }
            phase = .finished(termination)
            buffer.removeAll()
            bufferedBytes = 0
            return reader
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
                var wakePoller = false
                if case .open(_, .pollerWaiting) = phase, buffer.count <= capacity - wakeBatch,
                    bufferedBytes < byteCapacity - byteCapacity / 16
                {
                    wakePoller = true
                    setFlow(.polling)
                }
                return .message(message, pausesChanged: releaseFlowPauseIfDrained(), wakePoller: wakePoller)
            }
            switch phase {
            case .open: return .empty
            case .finished(.closed): return .finished(nil)
            case .finished(.failed(let error)): return .finished(error)
            }
        }

        /// A buffered record, or `.empty` even when the sequence has ended (the next `take` reports that).
        mutating func takeBuffered() -> TakeAction {
            guard !buffer.isEmpty else { return .empty }
            return take()
        }

        mutating func wait(_ waiter: Waiter) -> TakeAction {
            let action = take()
            if case .empty = action, case .open(let reader, let flow) = phase {
                precondition(reader == nil, "KafkaConsumer.messages has exactly one reader")
                phase = .open(reader: waiter, flow: flow)
            }
            return action
        }

        mutating func cancelWait() -> Waiter? {
            guard case .open(let reader, let flow) = phase else { return nil }
            phase = .open(reader: nil, flow: flow)
            return reader
        }

        // MARK: caller's pause and resume

        mutating func pause(_ partitions: [KafkaTopicPartition]) {
            callerPauses.formUnion(partitions)
        }

        mutating func resume(_ partitions: [KafkaTopicPartition]) {
            callerPauses.subtract(partitions)
        }

        private mutating func releaseFlowPauseIfDrained() -> Bool {
            guard case .open(_, .paused) = phase, buffer.count <= capacity / 2, bufferedBytes <= byteCapacity / 2 else {
                return false
            }
            setFlow(.polling)
            return true
        }
    }
}
