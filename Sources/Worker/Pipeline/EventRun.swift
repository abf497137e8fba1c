import APNs
import Foundation
import Kafka
import Threading

/// Where an event's end goes: the pipeline publishes its dead letter and its result, then gives its
/// in-flight room and its offset back; a test collects the result.
protocol EventOutlet: Sendable {
    /// Publishes `run.result`'s dead letter, then feeds `run.published(_:)`.
    func publishDeadLetter(of run: EventRun)
    /// Publishes `run.result`, then feeds `run.published(_:)`.
    func publishResult(of run: EventRun)
    /// Before a valid event's first attempt: true to make it now; false when the outlet parked it
    /// (its credential is over its share) and calls `unparked(abandon:)` when its turn comes.
    func mayBegin(_ run: EventRun) -> Bool
    /// The event ended: `done` (its offset may be committed) or abandoned.
    func ended(_ run: EventRun, done: Bool)
}

extension EventOutlet {
    func mayBegin(_ run: EventRun) -> Bool { true }
}

/// One consumed record on its way, from decoded to done or abandoned: what the event is, what has
/// happened to it (`machine`, `result`), and where it goes. Every callback of its life (the
/// sender's answer, a timer, the publisher's acknowledgement) feeds `machine` an input and performs
/// the action it returns (`perform`); `EventRun.StateMachine` says which step follows which.
///
/// One object handed from step to step: a callback captures the run alone, so no closure context
/// is allocated for it.
///
/// `@unchecked Sendable`: `machine`, `result`, `tokenRefreshes`, `shareCredential`, `completedAt`
/// and `latency` are mutated by one step at a time. Each step runs after the previous one handed
/// the run over through the sender's, the scheduler's or the publisher's callback, or the
/// pipeline's lock (a parked run taken out of its queue), which order the two; no two steps of one
/// event ever run at once.
final class EventRun: @unchecked Sendable {
    let record: KafkaConsumerMessage
    /// `nil` for a record that is not a valid event (it ends at once, with a dead letter).
    let event: NotificationEvent?
    /// What the record weighs against the in-flight byte bound.
    let bytes: Int
    /// Its partition's tenure at this member: once ended, the next attempt is not made.
    let lease: PartitionLease
    /// When it was taken: the result's latency counts from here.
    let started: ContinuousClock.Instant
    /// When its first attempt was made (the retry time budget counts from here).
    let firstAttempt: ContinuousClock.Instant
    var machine = StateMachine()
    var result: EventResult
    /// `ExpiredProviderToken` answers so far: the first is retried at once, later ones back off.
    var tokenRefreshes = 0
    /// The credential whose share it runs in (`CredentialShares`), once it runs there; `nil` outside
    /// any share, and while parked.
    var shareCredential: String?
    /// When its result became final: the dead letter's and the result's timestamp.
    var completedAt: Date?
    /// From taken to final (the result's `latencyMs`): the dead letter's round trip is not in it.
    var latency: Duration = .zero
    /// Its span, once its result is final, when span export is configured (`EventSpans`).
    var span: EventSpan?
    let processor: EventProcessor
    let outlet: any EventOutlet
    /// The bin of the thread that decoded it, where its last reference is dropped once it ended:
    /// its event was allocated there (HomeRelease).
    let home = HomeRelease.here

    init(
        record: KafkaConsumerMessage, event: NotificationEvent?, bytes: Int, lease: PartitionLease,
        started: ContinuousClock.Instant, result: EventResult, processor: EventProcessor, outlet: any EventOutlet
    ) {
        self.record = record
        self.event = event
        self.bytes = bytes
        self.lease = lease
        self.started = started
        self.firstAttempt = processor.instant()
        self.result = result
        self.processor = processor
        self.outlet = outlet
    }

    /// The sender's answer to the attempt in flight.
    func answered(_ attempt: SendAttempt) {
        let verdict = processor.verdict(on: attempt, for: self)
        perform(machine.answered(verdict, leaseActive: lease.isActive))
    }

    /// The publisher's end with the record being published.
    func published(_ publication: StateMachine.Publication) {
        perform(machine.published(publication))
    }

    /// The first step of a valid event: its first request joins `requests` if it is due now. A run
    /// the outlet parks stays `decoded` (nothing sent) until `unparked`.
    func begin(sending requests: inout [NotificationRequest]) {
        guard outlet.mayBegin(self) else { return }
        let action = machine.attempt(processor.gate(for: self))
        if case .send(let attempt) = action {
            requests.append(request(attempt: attempt))
        } else {
            perform(action)
        }
    }

    /// A parked run's turn: its first attempt, through the gate; or, `abandon`, it is given up
    /// unsent (its partition handed over, or shutdown), uncommitted for the next owner to read.
    func unparked(abandon: Bool) {
        perform(machine.attempt(abandon ? StateMachine.Gate(leaseActive: false) : processor.gate(for: self)))
    }

    /// Performs what the machine said, feeding it again where the action is itself an input's
    /// cause (the gate read now).
    func perform(_ action: StateMachine.Action) {
        switch action {
        case .readGate:
            perform(machine.attempt(processor.gate(for: self)))
        case .send(let attempt):
            let request = request(attempt: attempt)
            processor.sender.send(request.push, environment: request.environment, completion: request.completion)
        case .wait(let duration):
            processor.scheduler.after(duration, lease: lease) { [self] cancelled in
                perform(machine.waited(cancelled: cancelled))
            }
        case .expire:
            result.outcome = .expired
            publishResult()
        case .publishDeadLetter:
            stampCompletion()
            outlet.publishDeadLetter(of: self)
        case .publishResult:
            publishResult()
        case .end(let done):
            outlet.ended(self, done: done)
            // Its last reference goes back to the thread that decoded it.
            home.put(Unmanaged.passRetained(self))
        case .none:
            break
        }
    }

    private func publishResult() {
        stampCompletion()
        outlet.publishResult(of: self)
    }

    /// The result is final: its attempts as the machine counted them, its time.
    private func stampCompletion() {
        result.attempts = machine.attempts
        guard completedAt == nil else { return }
        let completed = processor.now()
        completedAt = completed
        latency = .now - started
        if let spans = processor.spans {
            span = spans.begin(
                record: record, trace: TraceContext(headers: record.headers), result: result,
                taken: completed - TimeInterval(latency / .seconds(1)), completed: completed)
        }
    }

    /// The event's APNs topic (its app), for messages.
    var topic: String { event?.push.topic ?? "?" }

    private func request(attempt: Int) -> NotificationRequest {
        // Only a valid event reaches an attempt (the machine starts sending from `begin`). Its parts
        // are read through the optional, not bound: a bound event is a copy, a retain of each of
        // its references.
        guard let push = event?.push, let environment = event?.environment else {
            preconditionFailure("an attempt for a record that is not an event")
        }
        result.attempts = attempt
        return NotificationRequest(push, environment: environment, completion: answered)
    }
}
