import Threading
import Kafka
import Synchronization

/// What the pipeline's one committer does next: a revocation's commit before anything else, or a
/// commit of whatever finished, soon after it finished but at most once per `spacing`.
///
/// Finishing events ask for a commit (`wantCommit`, one atomic exchange per event while a request
/// is pending); the committer takes requests one at a time (`next`), so one commit is in flight at
/// a time and a commit computed earlier can never land after (and undo) a later one.
final class CommitQueue: Sendable {
    enum Request: Sendable {
        /// Commit what changed in the partitions owned now.
        case soon
        /// Commit these partitions now and say how it went (a revocation).
        case partitions(Set<KafkaTopicPartition>, @Sendable (Outcome) -> Void)
    }

    /// How a revocation's commit went.
    enum Outcome: Sendable, Equatable {
        case stored
        /// Refused in a way that may pass at once (the coordinator moving, less metadata allowed).
        case worthRetrying
        /// Refused until the rebalance is over (which waits for this revocation), or never.
        case refused
    }

    private struct State {
        var revocations: [Request] = []
        var soonWanted = false
        /// A commit for `soon` may start from this instant on.
        var notBefore = ContinuousClock.now
        var waiter: CheckedContinuation<Request?, Never>?
        var wakeScheduled = false
        var finished = false
    }

    private let spacing: Duration
    private let state = Locked(State())
    /// Set while a `soon` request is pending: finishing events skip the lock.
    private let wanted = Atomic<Bool>(false)

    init(spacing: Duration) {
        self.spacing = spacing
    }

    /// Something finished: commit it soon. Cheap when a request is pending already.
    func wantCommit() {
        // A plain read first: while a request is pending (nearly always under load), finishing
        // events do not write the shared flag.
        guard !wanted.load(ordering: .relaxed), !wanted.exchange(true, ordering: .acquiringAndReleasing) else {
            return
        }
        let resume = state.withLock { state -> (CheckedContinuation<Request?, Never>, Request)? in
            state.soonWanted = true
            return take(&state)
        }
        if let (waiter, request) = resume { waiter.resume(returning: request) }
    }

    /// A revocation's commit: served before any `soon` one.
    /// Returns false when the committer has finished (nothing will serve it).
    @discardableResult
    func commitNow(_ partitions: Set<KafkaTopicPartition>, done: @escaping @Sendable (Outcome) -> Void) -> Bool {
        let (accepted, resume) = state.withLock {
            state -> (Bool, (CheckedContinuation<Request?, Never>, Request)?) in
            guard !state.finished else { return (false, nil) }
            state.revocations.append(.partitions(partitions, done))
            return (true, take(&state))
        }
        if let (waiter, request) = resume { waiter.resume(returning: request) }
        return accepted
    }

    /// The next request, when it is due; `nil` once finished.
    func next() async -> Request? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Request?, Never>) in
            let (ready, wakeAt) = state.withLock { state -> (Request??, ContinuousClock.Instant?) in
                if state.finished { return (.some(nil), nil) }
                if let request = takeReady(&state) { return (request, nil) }
                state.waiter = continuation
                guard state.soonWanted, !state.wakeScheduled else { return (nil, nil) }
                state.wakeScheduled = true
                return (nil, state.notBefore)
            }
            if let ready { continuation.resume(returning: ready) }
            if let wakeAt { scheduleWake(at: wakeAt) }
        }
    }

    /// A `soon` commit is starting: later ones wait `spacing` from now, and what finishes from now on
    /// asks for another.
    func commitStarting() {
        wanted.store(false, ordering: .releasing)
        state.withLock { $0.notBefore = .now + spacing }
    }

    /// The commit failed: another in a second (not at every finished event while Kafka refuses).
    func retryLater() {
        wanted.store(true, ordering: .releasing)
        let resume = state.withLock { state -> (CheckedContinuation<Request?, Never>, Request)? in
            state.soonWanted = true
            state.notBefore = max(state.notBefore, .now + max(spacing, .seconds(1)))
            return take(&state)
        }
        if let (waiter, request) = resume { waiter.resume(returning: request) }
    }

    /// Whether `finish` was called (nothing serves requests any more).
    var isFinished: Bool { state.withLock { $0.finished } }

    /// No more requests: a waiting `next` returns `nil`, and so does every later one.
    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<Request?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    // MARK: -

    /// The waiter and what to give it, if one waits and something is ready for it.
    private func take(_ state: inout State) -> (CheckedContinuation<Request?, Never>, Request)? {
        guard let waiter = state.waiter, let request = takeReady(&state) else {
            if state.waiter != nil, state.soonWanted, !state.wakeScheduled {
                state.wakeScheduled = true
                let at = state.notBefore
                Task { [self] in await wake(at: at) }
            }
            return nil
        }
        state.waiter = nil
        return (waiter, request)
    }

    private func takeReady(_ state: inout State) -> Request? {
        if !state.revocations.isEmpty { return state.revocations.removeFirst() }
        if state.soonWanted, state.notBefore <= .now {
            state.soonWanted = false
            return .soon
        }
        return nil
    }

    private func scheduleWake(at instant: ContinuousClock.Instant) {
        Task { [self] in await wake(at: instant) }
    }

    private func wake(at instant: ContinuousClock.Instant) async {
        try? await Task.sleep(until: instant, clock: .continuous)
        let resume = state.withLock { state -> (CheckedContinuation<Request?, Never>, Request)? in
            state.wakeScheduled = false
            return take(&state)
        }
        if let (waiter, request) = resume { waiter.resume(returning: request) }
    }
}
