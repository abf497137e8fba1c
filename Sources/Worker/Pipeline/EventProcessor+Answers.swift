import APNs
import Foundation
import Kafka
import Logging
import Threading

/// What an APNs answer (or its absence) makes of an event: done with its outcome, another attempt
/// after a wait, or failed; by the outcome table in docs/worker.md.
extension EventProcessor {
    /// Classifies an answer into the run's result and the verdict its state machine takes: final,
    /// or the next attempt (now, or after a backoff).
    func verdict(on attempt: SendAttempt, for run: EventRun) -> EventRun.StateMachine.Verdict {
        progress.step()
        if let error = attempt.error as? APNsNotificationError {
            // Refused by the client before sending, by a rule that depends on the credential the
            // topic routes to (a location push needs token authentication). Nothing was sent; the
            // fix is a credential that can send it, then replay.
            run.result.outcome = .rejected
            run.result.status = nil
            run.result.reason = error.code.rawValue
            run.result.detail =
                "\(EventProblem.pointer(for: error.field)): \(error.message); "
                + "configure a credential that can send it for topic \(run.topic), then replay"
            run.result.deadLetter = .noCredential
            markFailure(&run.result)
            return .final(deadLetter: true, sent: false)
        }
        if let error = attempt.error as? APNsClientError, error.code == .noCredentialForTopic {
            // Nothing was sent, and nothing is wrong with any credential: this worker is not
            // configured for the event's app. Readiness and the credential gauges stay as they are
            // (their labels come from configuration only, never from event data).
            run.result.outcome = .rejected
            run.result.reason = APNsClientError.Code.noCredentialForTopic.rawValue
            run.result.detail =
                "no configured credential matches topic \(run.topic); "
                + "add one to apns.credentials, then replay"
            run.result.deadLetter = .noCredential
            markFailure(&run.result)
            return .final(deadLetter: true, sent: false)
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
                    metadata: ["event": "\(run.result.eventID ?? "?")", "topic": "\(run.topic)"])
            }
            run.result.credential = attempt.credential
            run.result.outcome = .failed
            run.result.status = nil
            run.result.reason = error.code.rawValue
            run.result.detail = "credential \(credential): \(error.message); replace it, then replay"
            run.result.deadLetter = .credentials
            markFailure(&run.result)
            return .final(deadLetter: true, sent: false)
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
            return .final(deadLetter: false)
        case .unregistered(let timestamp):
            run.result.outcome = .unregistered
            run.result.apnsTimestamp = timestamp
            return .final(deadLetter: false)
        case .rejected(let reason):
            run.result.outcome = .rejected
            run.result.reason = reason?.description ?? run.result.reason
            run.result.detail =
                response.map { answer in
                    "APNs answered \(answer.status)"
                        + (answer.reason.map { reason in " \(reason)" + (reason.meaning.map { ": \($0)" } ?? "") } ?? "")
                } ?? attempt.error.map { "\($0)" }
            return .final(deadLetter: false)
        case .credentialsBroken(let reason):
            let push = run.event?.push
            if let credential = attempt.credential { observer.credentialBroken(credential, reason: reason) }
            if credentialLog.shouldLog(attempt.credential ?? "", now: instant()) {
                logger.error(
                    "APNs refused the credentials: \(reason) (logged once a minute per credential while it lasts)",
                    metadata: [
                        "event": "\(run.result.eventID ?? "?")", "to": "\(push.map { "\($0)" } ?? "?")",
                        "topic": "\(run.topic)",
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
            return .final(deadLetter: true)
        case .refreshToken:
            // Tokens follow a schedule every process shares: the first time, try again at once (a
            // connection may have moved to the next period's token meanwhile). Again and again means
            // APNs finds the schedule's token an hour old: this machine's clock is behind by more
            // than the schedule's margin. Back off like any retry instead of a burst of requests,
            // and say so.
            markFailure(&run.result)
            observer.retryScheduled(.providerToken)
            run.tokenRefreshes += 1
            if run.result.attempts >= retryPolicy.maxAttempts {
                run.result = exhausted(run.result)
                return .final(deadLetter: true)
            } else if run.tokenRefreshes == 1 {
                return .retryNow
            } else {
                if credentialLog.shouldLog("expired:" + (attempt.credential ?? ""), now: instant()) {
                    logger.warning(
                        "APNs keeps answering ExpiredProviderToken for credential \(attempt.credential ?? "?"): check this machine's clock (the token's iat); backing off"
                    )
                }
                return .retry(after: retryPolicy.backoffCeiling(afterAttempt: run.result.attempts))
            }
        case .retryLater(let perDeviceToken, _):
            markFailure(&run.result)
            let decision = retryPolicy.decide(
                attempts: run.result.attempts, elapsed: instant() - run.firstAttempt,
                expiration: run.event?.push.expiration, now: Int64(now().timeIntervalSince1970))
            switch decision {
            case .retry(let wait):
                observer.retryScheduled(Self.cause(attempt))
                if perDeviceToken {
                    // The limit is the token's: every event for it waits, not only this one; the
                    // next attempt waits for the throttle.
                    let ceiling = retryPolicy.backoffCeiling(afterAttempt: run.result.attempts)
                    throttle.withLock {
                        $0.throttle(run.event?.push.recipientKey ?? "", now: instant(), wait: max(wait, ceiling / 2))
                    }
                    return .retryNow
                } else {
                    return .retry(after: wait)
                }
            case .exhausted:
                run.result = exhausted(run.result)
                return .final(deadLetter: true)
            case .expired:
                run.result.outcome = .expired
                return .final(deadLetter: false)
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
