import Threading
import NIOCore
import NIOPosix

/// Runs work after a delay: the pipeline's retry backoffs, 429 throttles and publish retries.
///
/// An event waiting for its retry is not a sleeping task but an entry here, so thousands of
/// waiting events cost a timer each and no task. `cancelAll` (a forced shutdown) runs every pending
/// work item at once with `cancelled == true` and, from then on, every new one too: the event is
/// abandoned (left uncommitted, read again by the next owner) instead of retried.
protocol DelayScheduling: Sendable {
    /// `work` runs exactly once, on a thread of the scheduler's: after `delay`, or early with
    /// `cancelled == true` once the scheduler is cancelled (or `lease`'s waits are: `cancel(lease:)`).
    func after(_ delay: Duration, lease: PartitionLease?, _ work: @escaping @Sendable (_ cancelled: Bool) -> Void)

    /// Runs every pending work item of `lease` now, as cancelled: its partition is handed over, and
    /// its events waiting for a retry are the next owner's to push.
    func cancel(lease: PartitionLease)
}

extension DelayScheduling {
    func after(_ delay: Duration, _ work: @escaping @Sendable (_ cancelled: Bool) -> Void) {
        after(delay, lease: nil, work)
    }
}

/// `DelayScheduling` on a NIO event loop's timers.
final class EventLoopDelayScheduler: DelayScheduling {
    private struct State {
        var nextID = 0
        var cancelled = false
        var pending: [Int: Entry] = [:]
    }

    private struct Entry {
        var work: @Sendable (Bool) -> Void
        var timer: Scheduled<Void>?
        var lease: ObjectIdentifier?
    }

    private let loop: any EventLoop
    private let state = Locked(State())

    init(loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()) {
        self.loop = loop
    }

    /// Work items waiting.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    func after(_ delay: Duration, lease: PartitionLease?, _ work: @escaping @Sendable (Bool) -> Void) {
        let id: Int? = state.withLock { state in
            guard !state.cancelled else { return nil }
            state.nextID += 1
            state.pending[state.nextID] = Entry(work: work, lease: lease.map(ObjectIdentifier.init))
            return state.nextID
        }
        guard let id else {
            work(true)
            return
        }
        // A revocation hands the lease over, then sweeps its waits (`cancel(lease:)`). This wait may
        // have been asked for by an event that saw its lease active just before the hand-over, and
        // registered just after the sweep: the drain would wait out the whole delay for it. Looked
        // at after the entry is in, so that one of the two (this or the sweep) always takes it.
        if let lease, !lease.isActive, let entry = state.withLock({ $0.pending.removeValue(forKey: id) }) {
            entry.work(true)
            return
        }
        let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
        let timer = loop.scheduleTask(in: .nanoseconds(max(0, nanoseconds))) { [self] in
            if let entry = state.withLock({ $0.pending.removeValue(forKey: id) }) { entry.work(false) }
        }
        // Keep the handle for `cancelAll`, unless the timer already fired (or cancelAll ran).
        let stale = state.withLock { state -> Bool in
            guard state.pending[id] != nil else { return true }
            state.pending[id]?.timer = timer
            return false
        }
        if stale { timer.cancel() }
    }

    func cancel(lease: PartitionLease) {
        let owner = ObjectIdentifier(lease)
        let entries = state.withLock { state in
            let matching = state.pending.filter { $0.value.lease == owner }
            for id in matching.keys { state.pending[id] = nil }
            return Array(matching.values)
        }
        for entry in entries {
            entry.timer?.cancel()
            entry.work(true)
        }
    }

    /// Runs every pending work item now as cancelled, and every later one as soon as it is scheduled.
    func cancelAll() {
        let entries = state.withLock { state in
            state.cancelled = true
            defer { state.pending = [:] }
            return Array(state.pending.values)
        }
        for entry in entries {
            entry.timer?.cancel()
            entry.work(true)
        }
    }
}
