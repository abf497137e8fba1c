import Synchronization

/// Counts the pipeline's steps (a record admitted, an APNs answer, a publish attempt) for
/// `LivenessWatch`: one relaxed atomic add each, read once per tick. Not the done records' progress
/// (`KnownProgress`, the progress topic), which is about commits.
final class StepCounter: Sendable {
    private let count = Atomic<UInt64>(0)

    func step() {
        count.add(1, ordering: .relaxed)
    }

    var value: UInt64 { count.load(ordering: .relaxed) }
}

/// Whether the pipeline shows it is alive, decided once per tick: liveness is progress, not a timer
/// that always beats. Alive when the consumer's poll thread goes round (it serves rebalances and
/// heartbeats), and either nothing is pending (no event running, no record waiting for the reader),
/// or the pipeline took a step since the last tick, or results wait in a producer whose poll thread
/// goes round (Kafka is not taking them: librdkafka retries a leaderless partition or
/// NOT_ENOUGH_REPLICAS for minutes without a report; a restart could not publish either, and it
/// would push every uncommitted event again). A stuck reader (records waiting, none taken), a stuck
/// poll thread, or a deadlock (the tick itself never comes) stops the beats, and `/health/live`
/// turns red once its window passes without one.
struct LivenessWatch {
    /// The poll thread goes round every 100 ms (and checks in every second while a rebalance
    /// handler runs): longer than this without it is a stuck thread.
    let pollStall: Duration
    private var lastSteps: UInt64?

    init(pollStall: Duration = .seconds(15)) {
        self.pollStall = pollStall
    }

    /// - Parameter waitingForKafka: results wait in the producer, and its poll thread goes round.
    mutating func alive(steps: UInt64, pending: Bool, sincePolled: Duration, waitingForKafka: Bool = false) -> Bool {
        defer { lastSteps = steps }
        guard sincePolled <= pollStall else { return false }
        return !pending || steps != lastSteps || waitingForKafka
    }
}

/// Whether Kafka takes results, decided once per tick from the count of acknowledged records: none
/// acknowledged for `limit` while some wait is "waiting for Kafka" (readiness turns red and says
/// so; the worker goes on, since a restart could not publish either).
struct AcknowledgementWatch {
    /// How long results may wait without one acknowledged before readiness says so.
    let limit: Duration
    private var last: UInt64?
    private var stalledTicks = 0
    private var reported = false

    init(limit: Duration = .seconds(30)) {
        self.limit = limit
    }

    enum Change: Equatable {
        case unchanged
        /// None acknowledged for this long while some wait.
        case waiting(Duration)
        /// Acknowledgements come again (or nothing waits) after `waiting` was reported.
        case acceptedAgain
    }

    /// Once per second.
    mutating func tick(acknowledged: UInt64, unacknowledged: Int) -> Change {
        defer { last = acknowledged }
        if unacknowledged > 0, acknowledged == last {
            stalledTicks += 1
            let waited = Duration.seconds(stalledTicks)
            guard waited >= limit else { return .unchanged }
            reported = true
            return .waiting(waited)
        }
        stalledTicks = 0
        guard reported else { return .unchanged }
        reported = false
        return .acceptedAgain
    }
}
