import Synchronization

/// Steps the pipeline takes (a record admitted, an APNs answer, a publish attempt): one relaxed
/// atomic add each, read once per tick by the liveness check.
final class ProgressCounter: Sendable {
    private let count = Atomic<UInt64>(0)

    func step() {
        count.add(1, ordering: .relaxed)
    }

    var value: UInt64 { count.load(ordering: .relaxed) }
}

/// Whether the pipeline shows it is alive, decided once per tick: liveness is progress, not a timer
/// that always beats. Alive when the consumer's poll thread goes round (it serves rebalances and
/// heartbeats), and either nothing is pending (no event running, no record waiting for the reader)
/// or the pipeline took a step since the last tick. A stuck reader (records waiting, none taken), a
/// stuck poll thread, or a deadlock (the tick itself never comes) stops the beats, and
/// `/health/live` turns red once its window passes without one.
struct ProgressWatch {
    /// The poll thread goes round every 100 ms (and checks in every second while a rebalance
    /// handler runs): longer than this without it is a stuck thread.
    let pollStall: Duration
    private var lastSteps: UInt64?

    init(pollStall: Duration = .seconds(15)) {
        self.pollStall = pollStall
    }

    mutating func alive(steps: UInt64, pending: Bool, sincePolled: Duration) -> Bool {
        defer { lastSteps = steps }
        guard sincePolled <= pollStall else { return false }
        return !pending || steps != lastSteps
    }
}
