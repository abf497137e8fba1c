import APNs
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
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
    let throttle: NIOLockedValueBox<DeviceThrottle<ContinuousClock.Instant>>
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
        self.throttle = NIOLockedValueBox(DeviceThrottle())
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
    private final class Run: @unchecked Sendable {
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
    private func attempt(_ run: Run) {
        guard let request = nextAttempt(run) else { return }
        sender.send(request.push, environment: request.environment, completion: request.completion)
    }

    /// The next attempt after `wait` (a backoff, a throttle); abandoned if the wait is cancelled.
    private func attempt(_ run: Run, after wait: Duration) {
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
        if let wait = throttle.withLockedValue({ $0.count == 0 ? nil : $0.delay(for: run.token, now: instant()) }) {
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

    /// Classifies an answer: done, or the next attempt (now, or after a backoff).
    private func answered(_ run: Run, _ attempt: SendAttempt) {
        progress.step()
        if let error = attempt.error as? APNsNotificationError {
            // Refused by the client before sending, by a rule that depends on the credential the
            // topic routes to (a location push needs token authentication). Nothing was sent; the
            // fix is a credential that can send it, then replay.
            run.result.attempts -= 1
            run.result.outcome = .rejected
            run.result.status = nil
            run.result.reason = error.code.rawValue
            run.result.detail =
                "\(EventProblem.pointer(for: error.field)): \(error.message); "
                + "configure a credential that can send it for topic \(run.event.push.topic), then replay"
            run.result.deadLetter = .noCredential
            markFailure(&run.result)
            run.end(run.result)
            return
        }
        if let error = attempt.error as? APNsClientError, error.code == .noCredentialForTopic {
            // Nothing was sent, and nothing is wrong with any credential: this worker is not
            // configured for the event's app. Readiness and the credential gauges stay as they are
            // (their labels come from configuration only, never from event data).
            run.result.attempts -= 1
            run.result.outcome = .rejected
            run.result.reason = APNsClientError.Code.noCredentialForTopic.rawValue
            run.result.detail =
                "no configured credential matches topic \(run.event.push.topic); "
                + "add one to apns.credentials, then replay"
            run.result.deadLetter = .noCredential
            markFailure(&run.result)
            run.end(run.result)
            return
        }
        if let error = attempt.error as? APNsCredentialError {
            // The client refused before sending: the credential cannot be used as it is (a
            // certificate expired or not yet valid). Nothing reached APNs; the fix is a new key or
            // certificate, then replay.
            let credential = attempt.credential ?? "?"
            observer.credentialBroken(credential, reason: error.code.rawValue)
            if credentialLog.shouldLog(credential, now: instant()) {
                logger.error(
                    "credential \(credential) cannot be used: \(error.message) (logged once a minute per credential while it lasts)",
                    metadata: ["event": "\(run.event.id)", "topic": "\(run.event.push.topic)"])
            }
            run.result.attempts -= 1
            run.result.credential = attempt.credential
            run.result.outcome = .failed
            run.result.status = nil
            run.result.reason = error.code.rawValue
            run.result.detail = "credential \(credential): \(error.message); replace it, then replay"
            run.result.deadLetter = .credentials
            markFailure(&run.result)
            run.end(run.result)
            return
        }
        let response = attempt.response
        if let credential = attempt.credential { run.result.credential = credential }
        observer.apnsAnswered(
            status: response?.status, reason: response?.reason?.description, duration: attempt.duration)
        run.result.status = response?.status
        run.result.reason = response?.reason?.description ?? attempt.error.map(Self.reason(of:))
        if let apnsID = response?.apnsID { run.result.apnsID = apnsID }
        if let requestID = response?.requestID { run.result.apnsRequestID = requestID }
        if let uniqueID = response?.apnsUniqueID { run.result.apnsUniqueID = uniqueID }

        switch attempt.outcome {
        case .delivered:
            if let credential = attempt.credential { observer.credentialHealthy(credential) }
            run.result.outcome = .delivered
            run.result.reason = nil
            run.end(run.result)
        case .unregistered(let timestamp):
            run.result.outcome = .unregistered
            run.result.apnsTimestamp = timestamp
            run.end(run.result)
        case .rejected(let reason):
            run.result.outcome = .rejected
            run.result.reason = reason?.description ?? run.result.reason
            run.result.detail =
                response.map { answer in
                    "APNs answered \(answer.status)"
                        + (answer.reason.map { reason in " \(reason)" + (reason.meaning.map { ": \($0)" } ?? "") } ?? "")
                } ?? attempt.error.map { "\($0)" }
            run.end(run.result)
        case .credentialsBroken(let reason):
            let push = run.event.push
            if let credential = attempt.credential { observer.credentialBroken(credential, reason: reason) }
            if credentialLog.shouldLog(attempt.credential ?? "", now: instant()) {
                logger.error(
                    "APNs refused the credentials: \(reason) (logged once a minute per credential while it lasts)",
                    metadata: [
                        "event": "\(run.event.id)", "to": "\(push)", "topic": "\(push.topic)",
                    ])
            }
            run.result.outcome = .failed
            run.result.reason = run.result.reason ?? reason
            if response != nil {
                run.result.detail =
                    "APNs refused the provider credentials (\(reason)"
                    + (response?.reason?.meaning.map { ": \($0)" } ?? "") + "); fix them, then replay"
            } else {
                // No answer: the connection could not be made as configured (the server's
                // certificate did not verify, no HTTP/2); the outcome says where to look.
                run.result.detail = "\(attempt.outcome); then replay"
            }
            run.result.deadLetter = .credentials
            markFailure(&run.result)
            run.end(run.result)
        case .refreshToken:
            // The client has told the token authenticator. The first time, try again at once with
            // the new token. Again and again means a token APNs finds expired as soon as it is
            // signed (this machine's clock is off, or the authenticator may not refresh yet): back
            // off like any retry instead of a burst of requests, and say so.
            markFailure(&run.result)
            observer.retryScheduled(.providerToken)
            run.tokenRefreshes += 1
            if run.result.attempts >= retryPolicy.maxAttempts {
                run.end(exhausted(run.result))
            } else if run.tokenRefreshes == 1 {
                self.attempt(run)
            } else {
                if credentialLog.shouldLog("expired:" + (attempt.credential ?? ""), now: instant()) {
                    logger.warning(
                        "APNs keeps answering ExpiredProviderToken for credential \(attempt.credential ?? "?"): check this machine's clock (the token's iat); backing off"
                    )
                }
                let wait = retryPolicy.backoffCeiling(afterAttempt: run.result.attempts)
                self.attempt(run, after: wait)
            }
        case .retryLater(let perDeviceToken, _):
            markFailure(&run.result)
            let decision = retryPolicy.decide(
                attempts: run.result.attempts, elapsed: instant() - run.firstAttempt,
                expiration: run.event.push.expiration, now: Int64(now().timeIntervalSince1970))
            switch decision {
            case .retry(let wait):
                observer.retryScheduled(Self.cause(attempt))
                if perDeviceToken {
                    // The limit is the token's: every event for it waits, not only this one; the
                    // next attempt waits for the throttle.
                    let ceiling = retryPolicy.backoffCeiling(afterAttempt: run.result.attempts)
                    throttle.withLockedValue {
                        $0.throttle(run.token, now: instant(), wait: max(wait, ceiling / 2))
                    }
                    self.attempt(run)
                } else {
                    self.attempt(run, after: wait)
                }
            case .exhausted:
                run.end(exhausted(run.result))
            case .expired:
                run.result.outcome = .expired
                run.end(run.result)
            }
        }
    }

    /// The record's `dlq-replay-count` (0 when it was never replayed): results carry it, so that
    /// downstream can tell the latest word on an event from an earlier one.
    static func replays(of record: KafkaConsumerMessage) -> Int {
        guard !record.headers.isEmpty else { return 0 }
        return record.headers.lastString(DeadLetterHeader.replayCount).flatMap { Int($0) }.map { max(0, $0) } ?? 0
    }

    /// The `reason` of an event whose record is larger than `maxRecordBytes`.
    static let recordTooLargeReason = "recordTooLarge"

    /// The `reason` of an event that ended `expired` unsent because its record was too old.
    static let staleEventReason = "staleEvent"

    /// `3h 12m`, `45s`: an age for people (a measured age is not a round value, so not
    /// `ConfigDuration.format`'s exact spelling).
    static func describe(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        if seconds >= 3600 { return "\(seconds / 3600)h \(seconds % 3600 / 60)m" }
        if seconds >= 60 { return "\(seconds / 60)m \(seconds % 60)s" }
        return "\(seconds)s"
    }

    private func exhausted(_ result: EventResult) -> EventResult {
        var result = result
        result.outcome = .failed
        result.deadLetter = .retriesExhausted
        let last =
            result.status.map { "last answer \($0) \(result.reason ?? "")" }
            ?? "last failure \(result.reason ?? "unknown")"
        result.detail = "gave up after \(result.attempts) attempts; \(last)"
        return result
    }

    private func markFailure(_ result: inout EventResult) {
        let time = now()
        if result.firstFailureAt == nil { result.firstFailureAt = time }
        result.lastFailureAt = time
    }

    /// A short reason for a failure without an answer (`connectionLost`, `deadlineExceeded`, …).
    static func reason(of error: any Error) -> String {
        if let error = error as? APNsClientError { return error.code.rawValue }
        if let error = error as? APNsNotificationError { return error.apnsReason ?? error.code.rawValue }
        if let error = error as? APNsCredentialError { return error.code.rawValue }
        return "\(type(of: error))"
    }

    static func cause(_ attempt: SendAttempt) -> RetryCause {
        switch attempt.response?.status {
        case 429: return .tooManyRequests
        case 503: return .unavailable
        case .some: return .serverError
        case nil:
            if let error = attempt.error as? APNsClientError,
                error.code == .deadlineExceeded || error.code == .pingTimeout
            {
                return .timeout
            }
            return .transport
        }
    }
}

/// Says whether a message about `key` is due: at most once per `interval` for each key.
final class RateLimitedLog: Sendable {
    let interval: Duration
    private let last = NIOLockedValueBox<[String: ContinuousClock.Instant]>([:])

    init(interval: Duration) {
        self.interval = interval
    }

    func shouldLog(_ key: String, now: ContinuousClock.Instant) -> Bool {
        last.withLockedValue { last in
            if let previous = last[key], now - previous < interval { return false }
            last[key] = now
            return true
        }
    }
}
