import APNs
import Foundation
import Kafka
import Logging
import Threading

/// What an APNs answer (or its absence) makes of an event: done with its outcome, another attempt
/// after a wait, or failed; by the outcome table in docs/worker.md.
extension EventProcessor {
    /// Classifies an answer into the run's result and the verdict its state machine takes (final,
    /// or the next attempt, now or after a backoff), as `AnswerDecision` decides, and performs what
    /// the decision asks: observe, throttle the device token, log.
    func verdict(on attempt: SendAttempt, for run: EventRun) -> EventRun.StateMachine.Verdict {
        steps.step()
        let push = run.event?.push
        let event = AnswerDecision.Event(
            topic: run.topic, recipientKey: push?.recipientKey, expiration: push?.expiration)
        // The jitter from the system's generator through a closure: ThreadSanitizer crashes on an
        // `inout` access to `SystemRandomNumberGenerator` (a zero-sized value), so none is taken.
        let decision = AnswerDecision.decide(
            attempt, result: run.result, tokenRefreshes: run.tokenRefreshes, event: event, policy: retryPolicy,
            now: now, elapsed: { instant() - run.firstAttempt }, draw: { Int64.random(in: 0...$0) },
            effect: { perform($0, for: run) })
        run.result = decision.result
        run.tokenRefreshes = decision.tokenRefreshes
        return decision.verdict
    }

    private func perform(_ effect: AnswerDecision.Effect, for run: EventRun) {
        switch effect {
        case .answered(let status, let reason, let credential, let duration):
            observer.apnsAnswered(status: status, reason: reason, credential: credential, duration: duration)
        case .credentialHealthy(let credential):
            observer.credentialHealthy(credential)
        case .credentialBroken(let credential, let reason):
            observer.credentialBroken(credential, reason: reason)
        case .retryScheduled(let cause):
            observer.retryScheduled(cause)
        case .throttleDevice(let key, let wait):
            throttle.withLock { $0.throttle(key, now: instant(), wait: wait) }
        case .credentialUnusable(let credential, let message):
            guard credentialLog.shouldLog(credential, now: instant()) else { return }
            logger.error(
                "credential \(credential) cannot be used: \(message) (logged once a minute per credential while it lasts)",
                metadata: [
                    "event": "\(run.result.eventID ?? "?")", "topic": "\(run.topic)", "credential": "\(credential)",
                ])
        case .credentialsRefused(let credential, let reason):
            guard credentialLog.shouldLog(credential ?? "", now: instant()) else { return }
            let push = run.event?.push
            logger.error(
                "APNs refused credential \(credential ?? "?"): \(reason) (logged once a minute per credential while it lasts)",
                metadata: [
                    "event": "\(run.result.eventID ?? "?")", "to": "\(push.map { "\($0)" } ?? "?")",
                    "topic": "\(run.topic)", "credential": "\(credential ?? "?")",
                ])
        case .clockBehind(let credential):
            guard credentialLog.shouldLog("expired:" + (credential ?? ""), now: instant()) else { return }
            logger.warning(
                "APNs keeps answering ExpiredProviderToken for credential \(credential ?? "?"): check this machine's clock (the token's iat); backing off",
                metadata: ["credential": "\(credential ?? "?")"])
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
