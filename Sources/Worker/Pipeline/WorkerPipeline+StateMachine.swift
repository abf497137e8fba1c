import Kafka

extension WorkerPipeline {
    /// The pipeline's shared state: whether it runs or stops (with a deadline), whether input flows or
    /// is held and whether the reader waits for it, the partitions this member owns (each with its
    /// lease) and their records in flight (for commits), how many events run (for backpressure), and
    /// who waits for a drain. Pure: every method returns what to do, and the caller does it outside
    /// the lock.
    ///
    /// Input is held (the reader waits) for either of two reasons: `maxInFlight` events, or
    /// `maxInFlightBytes` of their records, are running (until both are down to half), or an output
    /// topic is blocked, refusing every record (until one is stored there again). While stopping, the
    /// reader never waits and nothing is admitted.
    ///
    /// A hold stops the reader, not librdkafka: its partitions go on fetching into the consumer's
    /// bounded buffer, which pauses them itself once it has stayed full past its grace (a long hold).
    /// Pausing them at every hold threw away what librdkafka had prefetched, and librdkafka 2.0's
    /// broker thread noticed the resume only at its next wake-up, up to a second later: at a 100 ms
    /// APNs round trip the worker, which holds at its bound every round trip, kept a third of its
    /// throughput.
    struct StateMachine {
        typealias Waiter = CheckedContinuation<Void, Never>

        enum State {
            /// Records are admitted; `Input` says whether the reader may read on.
            case running(Input)
            /// Shutdown began; everything must be done by `deadline`. Nothing is admitted and no reader
            /// waits. The hold (nil: none) is kept because it still acts: input reads as held until it
            /// ends, and an output topic that refuses records for too long still makes the pipeline's
            /// `run()` throw.
            case stopping(deadline: ContinuousClock.Instant, hold: Hold?)
        }

        enum Input {
            case flowing
            /// The reader may not read on. `reader`: it waits, and is resumed when the hold ends or
            /// shutdown begins.
            case held(Hold, reader: Waiter?)
        }

        /// Why input is held. Always at least one reason: a hold left with none ends (the input flows).
        struct Hold {
            /// `maxInFlight` or `maxInFlightBytes` was reached, and the running events are not yet down
            /// to half of both.
            var boundReached = false
            /// Blocked output topics: each refuses every record (no such topic, not authorized), since when.
            var blockedTopics: [String: ContinuousClock.Instant] = [:]

            var hasReason: Bool { boundReached || !blockedTopics.isEmpty }
        }

        /// Events between "read" and "done", whatever their partition's fate (a revoked partition's
        /// events run to the end or to their next step; they just no longer count for commits).
        struct Load {
            var events = 0
            /// The running events' record bytes.
            var bytes = 0
            /// Events parked over their credential's share (`CredentialShares`): read, not running,
            /// outside `events` and `bytes`.
            var parked = 0
        }

        let maxInFlight: Int
        /// The bound in bytes of the running events' records (`KafkaConsumerMessage.byteCount`).
        let maxInFlightBytes: Int
        /// The bound of parked events (`delivery.maxParked`).
        let maxParked: Int
        /// Who runs and who waits per credential; `nil`: no share (one credential).
        var shares: CredentialShares.Queues<EventRun>?
        /// Parked events reached `maxParked` during this hold: it lasts until they are down to half.
        var parkedFilled = false
        private var state: State = .running(.flowing)
        // Beside `state`, not inside it: these live through both phases (a revocation and shutdown's
        // drain need them while stopping), and `admit` and `finish` change the load and the tracker once
        // per event, which inside an enum payload would cost taking it out and putting it back each time.
        private(set) var ownership = Ownership()
        /// Changed by admission, completion and parking (`WorkerPipeline+Shares.swift`) only.
        var load = Load()
        /// Who waits for a drain: revocations (in either phase) and shutdown's drain.
        private var drainWaiters: [(partitions: Set<KafkaTopicPartition>?, waiter: Waiter)] = []

        init(maxInFlight: Int, maxInFlightBytes: Int = .max, maxParked: Int? = nil, shareCap: Int? = nil) {
            self.maxInFlight = max(maxInFlight, 1)
            self.maxInFlightBytes = max(maxInFlightBytes, 1)
            self.maxParked = max(maxParked ?? maxInFlight, 1)
            self.shares = shareCap.map { CredentialShares.Queues(cap: max($0, 1)) }
        }

        /// Input is held: the reader waits (while running; while stopping it never waits).
        var inputHeld: Bool {
            switch state {
            case .running(.flowing), .stopping(_, nil): false
            case .running(.held), .stopping(_, _?): true
            }
        }

        var boundReached: Bool {
            switch state {
            case .running(.flowing), .stopping(_, nil): false
            case .running(.held(let hold, _)), .stopping(_, let hold?): hold.boundReached
            }
        }

        var blockedTopics: [String: ContinuousClock.Instant] {
            switch state {
            case .running(.flowing), .stopping(_, nil): [:]
            case .running(.held(let hold, _)), .stopping(_, let hold?): hold.blockedTopics
            }
        }

        /// Shutdown's deadline, once shutdown began.
        var deadline: ContinuousClock.Instant? {
            guard case .stopping(let deadline, _) = state else { return nil }
            return deadline
        }

        var isStopping: Bool { deadline != nil }

        /// Partitions owned now (assigned, not being revoked).
        var owned: Set<KafkaTopicPartition> { ownership.owned }

        var running: Int { load.events }

        var runningBytes: Int { load.bytes }

        // MARK: assignment

        /// The group gave these partitions to this member: each gets a new lease and fresh tracking
        /// (whatever an earlier lease left is no longer this member's to commit). Returns the leases
        /// that ended (a partition assigned again while its old revocation had not finished).
        mutating func assign(
            _ partitions: [KafkaTopicPartition], tenure: UInt64, progress: [KafkaTopicPartition: KnownProgress] = [:]
        ) -> [PartitionLease] {
            let bounds = DoneRecordBounds(maxInFlight: maxInFlight, maxParked: maxParked)
            return ownership.assign(partitions, tenure: tenure, progress: progress, notDoneAllowed: bounds.maxGaps)
        }

        /// The group takes these partitions away: nothing more of them is admitted from now on. Their
        /// running events go on (the revocation waits for those at APNs, bounded) and their offsets
        /// stay tracked until `forget`. Returns their leases, for the caller to hand over.
        @discardableResult
        mutating func revoke(_ partitions: some Sequence<KafkaTopicPartition>) -> [PartitionLease] {
            ownership.revoke(partitions)
        }

        /// The revocation is over (committed, or given up): forget the partitions' offsets and end their
        /// leases, so that their events still waiting for a retry are abandoned. What they finished and
        /// did not store (a lost assignment cannot commit; a revocation's commit may have given up, or
        /// events finished after it) is kept as owed: should the group give a partition back to this
        /// member, it is not run again (`takeOwed`). A partition owned again meanwhile (a new lease)
        /// is left alone. Returns the ended leases.
        mutating func forget(_ partitions: some Sequence<KafkaTopicPartition>) -> [PartitionLease] {
            ownership.forget(partitions)
        }

        /// What this member finished and did not store in these partitions before it let them go,
        /// taken: for the assignment that gives them back (`KnownProgress.starting`).
        mutating func takeOwed(_ partitions: some Sequence<KafkaTopicPartition>) -> [KafkaTopicPartition: OwedProgress]
        {
            ownership.takeOwed(partitions)
        }

        /// The lease a record of this partition fetched in the consumer's tenure `tenure` would be
        /// admitted under now: the partition's, if it is owned and was assigned in that tenure or
        /// before. A record fetched before the partition's current assignment belongs to a lease
        /// that ended (revoked or lost, even if assigned back since): the current one reads it again
        /// from its committed offset, which may lie below it.
        func lease(of partition: KafkaTopicPartition, readIn tenure: UInt64) -> PartitionLease? {
            guard let lease = ownership.lease(of: partition), tenure >= lease.assignedIn else { return nil }
            return lease
        }

        // MARK: reader

        enum AdmitAction {
            /// Run it; `holdBegan`: this one fills the bound, input is held from now on;
            /// `refusedKnownDone`: it showed the partition's known done records untrue (`PartitionOffsets`).
            case run(holdBegan: Bool, refusedKnownDone: Bool = false)
            /// Drop it unread: its partition is no longer owned under the lease it was read under, or
            /// the pipeline is stopping. It stays uncommitted; its partition's owner reads it again.
            case skip
            /// Done already (an earlier owner's commit says so): counted as done, not run again.
            case alreadyDone
        }

        /// A record read under `lease` is about to run. Checked after every wait of the reader, since
        /// the partition may have been revoked (and even assigned back) meanwhile.
        mutating func admit(
            _ partition: KafkaTopicPartition, offset: Int64, lease: PartitionLease, bytes: Int = 0
        ) -> AdmitAction {
            guard case .running = state, let started = ownership.start(partition, offset: offset, lease: lease) else {
                return .skip
            }
            // `.ignored` (an offset at or below one already read: librdkafka reset the position) runs
            // untracked, so that it still ends with a result.
            if started == .alreadyDone { return .alreadyDone }
            let refused = started == .refusedKnownDone
            load.events += 1
            load.bytes += bytes
            guard atBound else { return .run(holdBegan: false, refusedKnownDone: refused) }
            return .run(holdBegan: holdAtBound(), refusedKnownDone: refused)
        }

        /// A bound is reached: running events or their bytes, or parked events.
        var atBound: Bool {
            load.events >= maxInFlight || load.bytes >= maxInFlightBytes || load.parked >= maxParked
        }

        /// A hold for the bound ends: running events and their bytes down to half, and parked events
        /// below their bound (down to half, if they filled it). A hold for running events does not
        /// wait for parked ones: those wait for their own credential, which may be the stuck one.
        var belowHalf: Bool {
            load.events <= maxInFlight / 2 && load.bytes <= maxInFlightBytes / 2
                && load.parked <= (parkedFilled ? maxParked / 2 : maxParked - 1)
        }

        /// The bound is reached: input is held for it (while running). Returns true when this began
        /// the hold.
        mutating func holdAtBound() -> Bool {
            if load.parked >= maxParked { parkedFilled = true }
            switch state {
            case .running(.flowing):
                state = .running(.held(Hold(boundReached: true), reader: nil))
                return true
            case .running(.held(var hold, let reader)) where !hold.boundReached:
                // Held for a blocked topic already: the bound is one more reason to hold.
                hold.boundReached = true
                state = .running(.held(hold, reader: reader))
                return false
            case .running(.held), .stopping:
                return false
            }
        }

        /// Before reading the next record: read on, or wait while input is held. Returns true when the
        /// reader may read on, false when the waiter was stored (it is resumed when the hold ends or
        /// shutdown begins).
        mutating func readOrWait(_ waiter: Waiter) -> Bool {
            guard case .running(.held(let hold, let reader)) = state else { return true }
            precondition(reader == nil, "one reader")
            state = .running(.held(hold, reader: waiter))
            return false
        }

        // MARK: completion

        struct FinishAction {
            /// Resume the reader.
            var resume: Waiter?
            /// The hold ended: input flows again.
            var holdEnded = false
            /// Revocations or a shutdown waiting for these events.
            var drained: [Waiter] = []
        }

        /// An event is done: its result (and dead letter) are acknowledged. Its offset counts only if
        /// its partition is still tracked under the lease it was admitted with.
        mutating func finish(
            _ partition: KafkaTopicPartition, offset: Int64, lease: PartitionLease, bytes: Int = 0
        ) -> FinishAction {
            ownership.finish(partition, offset: offset, lease: lease)
            return ended(bytes: bytes)
        }

        /// An event was abandoned (its lease was handed over or ended, or shutdown cancelled its wait):
        /// it no longer runs, and is not done, so nothing at or after it in its partition is
        /// committed and it is read again; a revocation no longer waits for it.
        mutating func abandon(
            _ partition: KafkaTopicPartition, offset: Int64, lease: PartitionLease, bytes: Int = 0
        ) -> FinishAction {
            ownership.abandon(partition, offset: offset, lease: lease)
            return ended(bytes: bytes)
        }

        private mutating func ended(bytes: Int) -> FinishAction {
            load.events -= 1
            load.bytes -= bytes
            var action = FinishAction()
            if boundReached, belowHalf { action = endBoundHold() }
            if !drainWaiters.isEmpty {
                var waiting: [(partitions: Set<KafkaTopicPartition>?, waiter: Waiter)] = []
                for entry in drainWaiters {
                    if isDrained(entry.partitions) {
                        action.drained.append(entry.waiter)
                    } else {
                        waiting.append(entry)
                    }
                }
                drainWaiters = waiting
            }
            return action
        }

        /// The bound's reason for the hold is gone (and a filled parking's with it).
        mutating func endBoundHold() -> FinishAction {
            parkedFilled = false
            return changeHold { $0.boundReached = false }
        }

        /// Changes the hold, in either phase (nothing to change while input flows). The hold is taken out
        /// of the state while it changes, so that its dictionary is changed in place rather than copied.
        /// A hold left with no reason ends: input flows again (and the reader resumes, if it waits).
        mutating func changeHold(_ change: (inout Hold) -> Void) -> FinishAction {
            var action = FinishAction()
            switch state {
            case .running(.flowing), .stopping(_, nil):
                break
            case .running(.held(var hold, let reader)):
                state = .running(.flowing)
                change(&hold)
                if hold.hasReason {
                    state = .running(.held(hold, reader: reader))
                } else {
                    action.holdEnded = true
                    action.resume = reader
                }
            case .stopping(let deadline, var hold?):
                state = .stopping(deadline: deadline, hold: nil)
                change(&hold)
                if hold.hasReason {
                    state = .stopping(deadline: deadline, hold: hold)
                } else {
                    action.holdEnded = true
                }
            }
            return action
        }

        // MARK: output topics

        /// `topic` is blocked: every record to it is refused. Returns true when this begins a hold.
        mutating func block(_ topic: String, now: ContinuousClock.Instant) -> Bool {
            switch state {
            case .running(.flowing):
                state = .running(.held(Hold(blockedTopics: [topic: now]), reader: nil))
                return true
            case .stopping(let deadline, nil):
                state = .stopping(deadline: deadline, hold: Hold(blockedTopics: [topic: now]))
                return true
            case .running(.held), .stopping(_, _?):
                // Held already: the topic is one more reason (refusing since its first report).
                _ = changeHold { hold in
                    if hold.blockedTopics[topic] == nil { hold.blockedTopics[topic] = now }
                }
                return false
            }
        }

        /// A record was stored in `topic` again: what to resume, if this ended the hold. A topic that
        /// was not blocked changes nothing (a hold always keeps a reason).
        mutating func unblock(_ topic: String) -> FinishAction {
            changeHold { $0.blockedTopics[topic] = nil }
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
            switch state {
            case .running(.flowing):
                state = .stopping(deadline: deadline, hold: nil)
                return (true, nil)
            case .running(.held(let hold, let reader)):
                state = .stopping(deadline: deadline, hold: hold)
                return (true, reader)
            case .stopping:
                return (false, nil)
            }
        }

        /// Every lease held: at shutdown's drain bound the caller ends them all, so that what still
        /// waits for a retry is abandoned.
        var allLeases: [PartitionLease] { Array(ownership.leases.values) }

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
        func commitCandidates(in selection: Set<KafkaTopicPartition>?) -> [CommitCandidate] {
            ownership.commitCandidates(in: selection)
        }

        mutating func markCommitted(_ committed: [CommitCandidate]) {
            ownership.markCommitted(committed)
        }

        /// What is done in these partitions and not committed, said against the offset the broker has
        /// committed (everything from it up to the candidate's offset is done, and the candidate's
        /// done records): for a progress record when a revocation could not commit.
        func doneSinceLastStored(_ partitions: Set<KafkaTopicPartition>) -> [CommitCandidate] {
            againstLastStored(ownership.commitCandidates(in: partitions))
        }

        /// These candidates said against the offset the broker has committed, where they move it:
        /// everything from it up to the candidate's offset is done, and the candidate's done records.
        func againstLastStored(_ candidates: [CommitCandidate]) -> [CommitCandidate] {
            candidates.compactMap { candidate in
                guard let stored = ownership.tracker.lastStoredOffset(of: candidate.partition),
                    stored < candidate.offset
                else { return nil }
                var done = candidate.done
                done.insert(stored..<candidate.offset)
                return CommitCandidate(
                    partition: candidate.partition, offset: stored, done: done, version: candidate.version,
                    leaseNumber: candidate.leaseNumber)
            }
        }

        private func isDrained(_ partitions: Set<KafkaTopicPartition>?) -> Bool {
            guard let partitions else { return load.events == 0 && load.parked == 0 }
            return ownership.tracker.inFlight(in: partitions) == 0
        }
    }
}
