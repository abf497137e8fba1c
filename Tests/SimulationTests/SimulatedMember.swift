import Kafka

@testable import Worker

/// One worker process in the simulation: the pipeline's real machine (`WorkerPipeline.StateMachine`,
/// with its ownership, offset tracking and owed progress), the real commit metadata and progress
/// arithmetic (`CommitMetadata`, `KnownProgress`, `DoneRecordBounds`), and around them the shell's
/// sequences as `WorkerPipeline` runs them (reader, revocation, committer, shutdown), each step one
/// call of the machine with the simulation's clock and chance in place of threads and the network.
struct SimulatedMember {
    /// Unique per process: a restart is a new instance.
    let instance: Int
    var machine: WorkerPipeline.StateMachine
    /// The consumer's count of assignment changes.
    var tenure: UInt64 = 0
    /// The member's generation in the group: a new one each time it is thrown out (a lost
    /// assignment) and joins again. The broker refuses a commit sent in an earlier one.
    var generation = 0
    /// Where each assigned partition fetches next.
    var positions: [Int32: Int64] = [:]
    /// Fetched records not yet read, each with the tenure it was fetched in.
    var buffer: [(record: RecordID, tenure: UInt64)] = []
    var events: [Event] = []
    var revocations: [Revocation] = []
    var commit: CommitInFlight?
    var nextCommitAt: Int64 = 0
    /// The commit metadata budget (halved when the broker refuses as much).
    var metadataBudget = 4096
    var stop: Stop?

    struct Event {
        var record: RecordID
        let lease: PartitionLease
        var phase: Phase
        /// The result so far, as `AnswerDecision` keeps it.
        var result = EventResult(eventID: nil, outcome: .failed, attempts: 0)
        var tokenRefreshes = 0
        var firstAttemptAt: Int64?
    }

    enum Phase {
        case sending(at: Int64)
        case atAPNs(answerAt: Int64, answer: Answer)
        case waitingRetry(until: Int64)
        case publishing(ackAt: Int64)
    }

    enum Answer: CaseIterable {
        /// 200: delivered.
        case delivered
        /// A 400-family refusal: the result says failed, a dead letter is written.
        case refused
        /// 429 (for the device token), 500 or 503: retried after a backoff.
        case retryable
        /// 403 ExpiredProviderToken: once at once, then backing off.
        case expiredToken
        /// The connection failed before the request went out: retried, nothing delivered.
        case lostBeforeSending
        /// The connection failed after it went out, or no answer came: retried; APNs may have
        /// delivered it.
        case unanswered
    }

    struct Revocation {
        var partitions: Set<Int32>
        var lost: Bool
        var deadline: Int64
        var phase: RevocationPhase
        /// The member the group gives the partitions to once this ends (graceful hand-overs only).
        var next: Int?
    }

    enum RevocationPhase: Equatable {
        case draining
        case committing
        case waitingForCommit
    }

    struct CommitInFlight {
        var candidates: [CommitCandidate]
        var metadata: [Int32: (text: String?, omitted: Int64)]
        var landsAt: Int64
        /// The revocation it commits for (its partitions), or nil for a periodic commit.
        var revocation: Set<Int32>?
        /// The member's generation when it was sent.
        var generation: Int
    }

    struct Stop {
        var drainUntil: Int64
        var commitUntil: Int64
        var committed = false
    }

    init(instance: Int, maxInFlight: Int) {
        self.instance = instance
        machine = WorkerPipeline.StateMachine(maxInFlight: maxInFlight)
    }

    var owned: Set<Int32> { Set(machine.owned.map(\.partition)) }

    var revoking: Set<Int32> { revocations.reduce(into: []) { $0.formUnion($1.partitions) } }

    func inFlight(in partitions: Set<Int32>) -> Int {
        machine.ownership.tracker.inFlight(in: partitions.map(SimulatedKafka.partition))
    }
}
