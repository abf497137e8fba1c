import APNs
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers

/// Takes one consumed record to its end: decode and validate, send, retry where APNs says "later",
/// and say how it ended. It publishes nothing itself (the pipeline does) and never throws: every
/// record ends in an `EventResult`, except when the task is cancelled (a forced shutdown), which
/// leaves the record uncommitted so that it is read again.
struct EventProcessor: Sendable {
    let decoder: NotificationEventDecoder
    let sender: any NotificationSending
    let retryPolicy: RetryPolicy
    let throttle: NIOLockedValueBox<DeviceThrottle<ContinuousClock.Instant>>
    let observer: any PipelineObserver
    let logger: Logger
    /// Wall time, for expirations and failure timestamps (injectable for tests).
    let now: @Sendable () -> Date

    init(
        decoder: NotificationEventDecoder, sender: any NotificationSending, retryPolicy: RetryPolicy,
        observer: any PipelineObserver, logger: Logger, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.decoder = decoder
        self.sender = sender
        self.retryPolicy = retryPolicy
        self.throttle = NIOLockedValueBox(DeviceThrottle())
        self.observer = observer
        self.logger = logger
        self.now = now
    }

    /// `nil` only when cancelled.
    func process(_ record: KafkaConsumerMessage) async -> EventResult? {
        guard let value = record.value else {
            var result = EventResult(eventID: nil, outcome: .invalid, attempts: 0)
            result.reason = "malformedJSON"
            result.detail = "(root): the record has no value"
            result.deadLetter = .malformedJSON
            return result
        }
        let event: NotificationEvent
        do {
            event = try decoder.decode(value)
        } catch {
            var result = EventResult(eventID: error.eventID, outcome: .invalid, attempts: 0)
            result.reason = error.problems[0].keyword
            result.detail = error.deadLetterDetail
            result.deadLetter = error.deadLetterReason
            return result
        }
        return await send(event)
    }

    private func send(_ event: NotificationEvent) async -> EventResult? {
        let notification = event.notification
        let token = notification.deviceToken.hex
        let clock = ContinuousClock()
        let firstAttempt = clock.now
        var result = EventResult(eventID: event.id, outcome: .failed, attempts: 0)
        result.metadata = event.metadata
        var random = SystemRandomNumberGenerator()
        var metadata: Logger.Metadata {
            ["event": "\(event.id)", "token": "\(notification.deviceToken)", "topic": "\(notification.topic)"]
        }

        while true {
            if let wait = throttle.withLockedValue({ $0.delay(for: token, now: clock.now) }) {
                guard (try? await Task.sleep(for: wait)) != nil else { return nil }
            }
            let seconds = Int64(now().timeIntervalSince1970)
            if result.attempts > 0, let expiration = notification.expiration, expiration.hasPassed(now: seconds) {
                result.outcome = .expired
                return result
            }
            guard !Task.isCancelled else { return nil }
            result.attempts += 1
            let attempt = await sender.send(notification, environment: event.environment)
            let response = attempt.response
            observer.apnsAnswered(status: response?.status, reason: response?.reason?.description, duration: attempt.duration)
            result.status = response?.status
            result.reason = response?.reason?.description ?? attempt.error.map(Self.reason(of:))
            if let apnsID = response?.apnsID { result.apnsID = apnsID }

            switch attempt.outcome {
            case .delivered:
                if let credential = attempt.credential { observer.credentialHealthy(credential) }
                result.outcome = .delivered
                result.reason = nil
                return result
            case .unregistered(let timestamp):
                result.outcome = .unregistered
                result.apnsTimestamp = timestamp
                return result
            case .rejected(let reason):
                result.outcome = .rejected
                result.reason = reason?.description ?? result.reason
                result.detail = response.map { "APNs answered \($0.status)" } ?? attempt.error.map { "\($0)" }
                return result
            case .credentialsBroken(let reason):
                observer.credentialBroken(attempt.credential ?? notification.topic, reason: reason)
                logger.error("APNs refused the credentials: \(reason)", metadata: metadata)
                result.outcome = .failed
                result.reason = result.reason ?? reason
                result.detail = "APNs refused the provider credentials (\(reason)); fix them, then replay"
                result.deadLetter = .credentials
                markFailure(&result)
                return result
            case .refreshToken:
                // The client has told the token authenticator; try again at once (within maxAttempts).
                markFailure(&result)
                observer.retryScheduled(.providerToken)
                if result.attempts >= retryPolicy.maxAttempts { return exhausted(result) }
                continue
            case .retryLater(let perDeviceToken, _):
                markFailure(&result)
                let decision = retryPolicy.decide(
                    attempts: result.attempts, elapsed: clock.now - firstAttempt, expiration: notification.expiration,
                    now: Int64(now().timeIntervalSince1970), using: &random)
                switch decision {
                case .retry(let wait):
                    observer.retryScheduled(Self.cause(attempt))
                    if perDeviceToken {
                        // The limit is the token's: every event for it waits, not only this one.
                        let ceiling = retryPolicy.backoffCeiling(afterAttempt: result.attempts)
                        throttle.withLockedValue { $0.throttle(token, now: clock.now, wait: max(wait, ceiling / 2)) }
                    } else {
                        guard (try? await Task.sleep(for: wait)) != nil else { return nil }
                    }
                case .exhausted:
                    return exhausted(result)
                case .expired:
                    result.outcome = .expired
                    return result
                }
            }
        }
    }

    private func exhausted(_ result: EventResult) -> EventResult {
        var result = result
        result.outcome = .failed
        result.deadLetter = .retriesExhausted
        let last = result.status.map { "last answer \($0) \(result.reason ?? "")" } ?? "last failure \(result.reason ?? "unknown")"
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
        return "\(type(of: error))"
    }

    static func cause(_ attempt: SendAttempt) -> RetryCause {
        switch attempt.response?.status {
        case 429: return .tooManyRequests
        case 503: return .unavailable
        case .some: return .serverError
        case nil:
            if let error = attempt.error as? APNsClientError, error.code == .deadlineExceeded || error.code == .pingTimeout {
                return .timeout
            }
            return .transport
        }
    }
}
