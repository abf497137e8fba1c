import APNs
import Foundation
import Kafka
import Logging
import Threading

/// Takes one consumed record to its end: decode and validate, send, retry where APNs says "later",
/// and say how it ended. It publishes nothing itself (the pipeline does) and never throws: every
/// record ends in an `EventResult`, except when the scheduler is cancelled (a forced shutdown),
/// which leaves the record uncommitted so that it is read again.
///
/// No task per event: decoding runs on the caller's thread, each answer arrives on the sender's
/// callback, and a wait (backoff, a throttled token) is a timer of `scheduler`. An event is a value
/// (`Run`) handed from one step to the next, so no two threads ever touch the same one.
///
/// A class: each step's callback captures it, and a struct's dozen references were each retained
/// and released for every event and attempt.
final class EventProcessor: Sendable {
    let decoder: NotificationEventDecoder
    let sender: any NotificationSending
    let retryPolicy: RetryPolicy
    /// An event whose record is older than this (by its Kafka timestamp) ends `expired` unsent.
    let maxEventAge: Duration?
    /// Counts each APNs answer, for liveness.
    let progress: ProgressCounter
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

    /// How it ended: the result, or `nil` when abandoned (forced shutdown).
    typealias Completion = @Sendable (EventResult?) -> Void

    init(
        decoder: NotificationEventDecoder, sender: any NotificationSending, retryPolicy: RetryPolicy,
        scheduler: any DelayScheduling, observer: any PipelineObserver, logger: Logger,
        progress: ProgressCounter = ProgressCounter(), maxEventAge: Duration? = nil, maxRecordBytes: Int = .max,
        now: @escaping @Sendable () -> Date = Date.init,
        instant: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.decoder = decoder
        self.sender = sender
        self.retryPolicy = retryPolicy
        self.maxEventAge = maxEventAge
        self.progress = progress
        self.maxRecordBytes = maxRecordBytes
        self.scheduler = scheduler
        self.throttle = Locked(DeviceThrottle())
        self.observer = observer
        self.logger = logger
        self.now = now
        self.instant = instant
    }

    /// One event between its attempts: one object handed from step to step (a struct's dozen
    /// references were copied into every closure on the way).
    ///
    /// `@unchecked Sendable`: `result` is mutated by one step at a time. Each step runs after the
    /// previous one handed the object over through the sender's or the scheduler's callback, whose
    /// queues and locks order the two; no two steps of one event ever run at once.
    final class Run: @unchecked Sendable {
        let event: NotificationEvent
        let token: String
        let firstAttempt: ContinuousClock.Instant
        /// Its partition's tenure at this member: once ended, the next attempt is not made.
        let lease: PartitionLease
        var result: EventResult
        /// `ExpiredProviderToken` answers so far: the first is retried at once, later ones back off.
        var tokenRefreshes = 0
        /// Who takes its answers, and where its end goes: held here so that an attempt's callback
        /// captures the run alone (no context allocated for it).
        let processor: EventProcessor
        let completion: Completion
        /// The bin of the thread that decoded it, where its last reference is dropped once it ended:
        /// its event was allocated there (HomeRelease).
        let home = HomeRelease.here

        init(
            event: NotificationEvent, token: String, firstAttempt: ContinuousClock.Instant, lease: PartitionLease,
            result: EventResult, processor: EventProcessor, completion: @escaping Completion
        ) {
            self.event = event
            self.token = token
            self.firstAttempt = firstAttempt
            self.lease = lease
            self.result = result
            self.processor = processor
            self.completion = completion
        }

        func answered(_ attempt: SendAttempt) {
            processor.answered(self, attempt)
        }

        /// Hands the end to `completion` (once), then its last reference to the decoding thread.
        func end(_ result: EventResult?) {
            completion(result)
            home.put(Unmanaged.passRetained(self))
        }
    }

    /// Decodes `record` here and now; `completion` runs exactly once, here (an invalid event) or on
    /// the sender's or the scheduler's thread.
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
        guard let value = record.value else {
            var result = EventResult(eventID: nil, outcome: .invalid, attempts: 0)
            result.replays = Self.replays(of: record)
            result.reason = "malformedJSON"
            result.detail = "(root): the record has no value"
            result.deadLetter = .malformedJSON
            completion(result)
            return
        }
        guard value.count <= maxRecordBytes else {
            var result = EventResult(eventID: nil, outcome: .invalid, attempts: 0)
            result.replays = Self.replays(of: record)
            result.reason = Self.recordTooLargeReason
            result.detail =
                "(root): the record's value has \(value.count) bytes, more than delivery.maxRecordBytes (\(maxRecordBytes))"
            result.deadLetter = .recordTooLarge
            completion(result)
            return
        }
        let event: NotificationEvent
        do {
            event = try decoder.decode(value)
        } catch {
            var result = EventResult(eventID: error.eventID, outcome: .invalid, attempts: 0)
            result.replays = Self.replays(of: record)
            result.reason = error.resultReason
            result.detail = error.deadLetterDetail
            result.deadLetter = error.deadLetterReason
            completion(result)
            return
        }
        var result = EventResult(eventID: event.id, outcome: .failed, attempts: 0)
        result.metadata = event.metadata
        result.replays = Self.replays(of: record)
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
                completion(result)
                return
            }
        }
        let run = Run(
            event: event, token: event.push.recipientKey, firstAttempt: instant(), lease: lease,
            result: result, processor: self, completion: completion)
        if let request = nextAttempt(run) { requests.append(request) }
    }

    /// The next attempt, sent now.
    func attempt(_ run: Run) {
        guard let request = nextAttempt(run) else { return }
        sender.send(request.push, environment: request.environment, completion: request.completion)
    }

    /// The next attempt after `wait` (a backoff, a throttle); abandoned if the wait is cancelled.
    func attempt(_ run: Run, after wait: Duration) {
        // Handed over (or gone) already: its waits were cancelled, and this one would hold the
        // revocation's drain for nothing. The next owner pushes it.
        guard run.lease.isActive else {
            run.end(nil)
            return
        }
        scheduler.after(wait, lease: run.lease) { [self, run] cancelled in
            if cancelled { run.end(nil) } else { attempt(run) }
        }
    }

    /// The next attempt's request if it is due now; `nil` when it waits for the token's throttle
    /// (a timer sends it later) or the notification expired meanwhile (`completion` ran).
    private func nextAttempt(_ run: Run) -> NotificationRequest? {
        guard run.lease.isActive else {
            run.end(nil)  // the partition is gone: its next owner pushes this event
            return nil
        }
        // Nearly always empty: then neither the clock (slow in some VMs) nor the token's hash.
        if let wait = throttle.withLock({ $0.count == 0 ? nil : $0.delay(for: run.token, now: instant()) }) {
            attempt(run, after: wait)
            return nil
        }
        if run.result.attempts > 0, let expiration = run.event.push.expiration,
            expiration.hasPassed(now: Int64(now().timeIntervalSince1970))
        {
            run.result.outcome = .expired
            run.end(run.result)
            return nil
        }
        run.result.attempts += 1
        return NotificationRequest(run.event.push, environment: run.event.environment, completion: run.answered)
    }
}
