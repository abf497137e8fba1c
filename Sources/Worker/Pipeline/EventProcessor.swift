import APNs
import Foundation
import Kafka
import Logging
import Threading

/// What every event's run shares: how a record is decoded and validated, how an APNs answer is
/// classified (`verdict(on:for:)`, by the outcome table), what the next attempt must pass (`gate`),
/// and the sender, retry policy, scheduler and device-token throttles. One event's own state is its
/// `EventRun`; which step follows which is `EventRun.StateMachine`. It publishes nothing itself (an
/// `EventOutlet` does) and never throws: every record ends in an `EventResult`, except when the
/// scheduler is cancelled (a forced shutdown), which leaves the record uncommitted so that it is
/// read again.
///
/// No task per event: decoding runs on the caller's thread, each answer arrives on the sender's
/// callback, and a wait (backoff, a throttled token) is a timer of `scheduler`.
final class EventProcessor: Sendable {
    let decoder: NotificationEventDecoder
    let sender: any NotificationSending
    let retryPolicy: RetryPolicy
    /// An event whose record is older than this (by its Kafka timestamp) ends `expired` unsent.
    let maxEventAge: Duration?
    /// Counts each APNs answer, for liveness.
    let steps: StepCounter
    /// A record whose value is larger than this ends `invalid` unsent.
    let maxRecordBytes: Int
    let scheduler: any DelayScheduling
    let throttle: Locked<DeviceThrottle<ContinuousClock.Instant>>
    /// A refused credential refuses every event: its error is logged once a minute, not per event.
    let credentialLog = RateLimitedLog(interval: .seconds(60))
    let observer: any PipelineObserver
    let logger: Logger
    /// Wall time, for expirations and failure timestamps (injectable for tests).
    let now: @Sendable () -> Date
    /// Monotonic time, for throttles and the retry time budget (injectable for tests).
    let instant: @Sendable () -> ContinuousClock.Instant
    /// A span per event, when span export is configured.
    let spans: EventSpans?

    /// How it ended: the result, or `nil` when abandoned (forced shutdown).
    typealias Completion = @Sendable (EventResult?) -> Void

    init(
        decoder: NotificationEventDecoder, sender: any NotificationSending, retryPolicy: RetryPolicy,
        scheduler: any DelayScheduling, observer: any PipelineObserver, logger: Logger,
        steps: StepCounter = StepCounter(), maxEventAge: Duration? = nil, maxRecordBytes: Int = .max,
        spans: EventSpans? = nil, now: @escaping @Sendable () -> Date = Date.init,
        instant: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.decoder = decoder
        self.sender = sender
        self.retryPolicy = retryPolicy
        self.maxEventAge = maxEventAge
        self.steps = steps
        self.maxRecordBytes = maxRecordBytes
        self.scheduler = scheduler
        self.throttle = Locked(DeviceThrottle())
        self.observer = observer
        self.logger = logger
        self.now = now
        self.instant = instant
        self.spans = spans
    }

    /// Decodes `record` here and now, then sends it; `completion` runs exactly once, here (an
    /// invalid event) or on the sender's or the scheduler's thread, with the result as it would be
    /// published (a test's view: nothing is published).
    ///
    /// `lease`: the tenure of the record's partition at this member. Once it ends (the partition was
    /// revoked or lost, or shutdown's drain bound passed), the event makes no further attempt and
    /// ends abandoned (`nil`): the partition's next owner reads it again.
    func process(
        _ record: KafkaConsumerMessage, lease: PartitionLease = PartitionLease(), completion: @escaping Completion
    ) {
        var requests: [NotificationRequest] = []
        process(record, lease: lease, sending: &requests, completion: completion)
        sender.send(requests)
    }

    /// The same, except that the first attempt's request (if it is due now) is appended to
    /// `requests` for the caller to send, with others, through `sender.send(_:)`.
    func process(
        _ record: KafkaConsumerMessage, lease: PartitionLease, sending requests: inout [NotificationRequest],
        completion: @escaping Completion
    ) {
        process(
            record, bytes: record.byteCount, lease: lease, started: .now, sending: &requests,
            outlet: CompletionOutlet(completion: completion))
    }

    /// Decodes `record` here and starts its run: an invalid or too old record ends at once, a valid
    /// one's first request joins `requests` (if it is due now). `outlet` publishes its end.
    func process(
        _ record: KafkaConsumerMessage, bytes: Int, lease: PartitionLease, started: ContinuousClock.Instant,
        sending requests: inout [NotificationRequest], outlet: any EventOutlet
    ) {
        let (event, result) = decode(record)
        let run = EventRun(
            record: record, event: event, bytes: bytes, lease: lease, started: started, result: result,
            processor: self, outlet: outlet)
        if event == nil || result.outcome == .expired {
            run.perform(run.machine.endsUnsent(deadLetter: result.deadLetter != nil))
        } else {
            run.begin(sending: &requests)
        }
    }

    /// The event in `record` and the result it starts with; `nil` and its final result when the
    /// record is not a valid event. A valid event too old to send (`maxEventAge`) comes with its
    /// final result, `expired`.
    private func decode(_ record: KafkaConsumerMessage) -> (NotificationEvent?, EventResult) {
        var result = EventResult(eventID: nil, outcome: .invalid, attempts: 0)
        result.replays = Self.replays(of: record)
        guard let value = record.value else {
            result.reason = "malformedJSON"
            result.detail = "(root): the record has no value"
            result.deadLetter = .malformedJSON
            return (nil, result)
        }
        guard value.count <= maxRecordBytes else {
            result.reason = Self.recordTooLargeReason
            result.detail =
                "(root): the record's value has \(value.count) bytes, more than delivery.maxRecordBytes (\(maxRecordBytes))"
            result.deadLetter = .recordTooLarge
            return (nil, result)
        }
        let event: NotificationEvent
        do {
            event = try decoder.decode(value)
        } catch {
            result.eventID = error.eventID
            result.reason = error.resultReason
            result.detail = error.deadLetterDetail
            result.deadLetter = error.deadLetterReason
            return (nil, result)
        }
        result.eventID = event.id
        result.outcome = .failed
        result.metadata = event.metadata
        if let maxEventAge, let stamp = record.timestampMilliseconds {
            let age = Duration.milliseconds(Int64(now().timeIntervalSince1970 * 1000) - stamp)
            if age > maxEventAge {
                // A new or renamed consumer group, or expired group offsets, reads a topic's whole
                // retention: days-old pushes must not reach devices now.
                result.outcome = .expired
                result.reason = Self.staleEventReason
                result.detail =
                    "the record is \(Self.describe(age)) old, older than delivery.maxEventAge "
                    + "(\(ConfigDuration.format(maxEventAge))); not sent"
            }
        }
        return (event, result)
    }

    /// What the next attempt of `run` must pass (`EventRun.StateMachine.Gate`). Cheap on the usual
    /// path: an atomic load; the throttles' lock only while some token is throttled, and the clock
    /// only for a retry of a notification that expires.
    func gate(for run: EventRun) -> EventRun.StateMachine.Gate {
        var gate = EventRun.StateMachine.Gate(leaseActive: run.lease.isActive)
        guard gate.leaseActive else { return gate }
        // Nearly always empty: then neither the clock (slow in some VMs) nor the token's key.
        gate.throttled = throttle.withLock {
            $0.count == 0 ? nil : $0.delay(for: run.event?.push.recipientKey ?? "", now: instant())
        }
        if gate.throttled == nil, run.machine.attempts > 0, let expiration = run.event?.push.expiration {
            gate.expired = expiration.hasPassed(now: Int64(now().timeIntervalSince1970))
        }
        return gate
    }
}

/// A test's outlet: the result goes to `completion` as it would be published, and nothing is.
private struct CompletionOutlet: EventOutlet {
    let completion: EventProcessor.Completion

    func publishDeadLetter(of run: EventRun) {
        run.published(.stored)
    }

    func publishResult(of run: EventRun) {
        completion(run.result)
        run.published(.stored)
    }

    func ended(_ run: EventRun, done: Bool) {
        if !done { completion(nil) }
    }
}
