import APNs
import Foundation

/// What an APNs answer (or its absence) makes of an event, by the outcome table in docs/worker.md:
/// the result it writes, the verdict the event's state machine takes (final, with a dead letter or
/// not; another attempt now or after a wait), and what the shell does about it (observe, throttle a
/// device token, log). Pure: decided from the attempt, the event's result and token refreshes so far,
/// the retry policy, the times and a jitter draw given; the effects go, in order, to the `effect`
/// closure the caller passes (`EventProcessor.verdict` performs them; an array would cost an
/// allocation per answer). The deterministic simulation drives it with its own clock and chance.
struct AnswerDecision {
    var result: EventResult
    var verdict: EventRun.StateMachine.Verdict
    /// ExpiredProviderToken answers so far (the first is retried at once).
    var tokenRefreshes: Int

    /// What the shell does for a decision, in order.
    enum Effect: Equatable {
        /// An answer or a failure without one: the request counters and latency.
        case answered(status: Int?, reason: String?, credential: String?, duration: Duration)
        case credentialHealthy(String)
        case credentialBroken(String, reason: String)
        case retryScheduled(RetryCause)
        /// Every event for this device token waits `wait` (APNs throttles the token).
        case throttleDevice(key: String, wait: Duration)
        /// Logged at error, once a minute per credential: it cannot be used as configured.
        case credentialUnusable(credential: String, message: String)
        /// Logged at error, once a minute per credential: APNs refused the provider credentials.
        case credentialsRefused(credential: String?, reason: String)
        /// Logged at warning, once a minute per credential: ExpiredProviderToken again and again.
        case clockBehind(credential: String?)
    }

    /// The event as the decision needs it.
    struct Event {
        var topic: String
        var recipientKey: String?
        var expiration: APNsExpiration?
    }

    /// - Parameters:
    ///   - now: the wall clock, for the result's failure times and the expiration; `elapsed`: since the
    ///     event's first attempt. Both read only where a failure needs them: a delivered answer reads
    ///     no clock.
    ///   - draw: a uniform value in `0...n` (the backoff's jitter).
    ///   - effect: receives each effect, in order.
    static func decide(
        _ attempt: SendAttempt, result: EventResult, tokenRefreshes: Int, event: Event, policy: RetryPolicy,
        now: () -> Date, elapsed: () -> Duration, draw: (Int64) -> Int64, effect: (Effect) -> Void
    ) -> AnswerDecision {
        var decision = AnswerDecision(result: result, verdict: .retryNow, tokenRefreshes: tokenRefreshes)
        decision.decide(
            attempt, event: event, policy: policy, now: now, elapsed: elapsed, draw: draw, effect: effect)
        return decision
    }

    private mutating func decide(
        _ attempt: SendAttempt, event: Event, policy: RetryPolicy, now: () -> Date, elapsed: () -> Duration,
        draw: (Int64) -> Int64, effect: (Effect) -> Void
    ) {
        if refusedBeforeSending(attempt, event: event, now: now, effect: effect) { return }
        let response = attempt.response
        if let credential = attempt.credential { result.credential = credential }
        effect(
            .answered(
                status: response?.status, reason: response?.reason?.description, credential: attempt.credential,
                duration: attempt.duration))
        result.status = response?.status
        result.reason = response?.reason?.description ?? attempt.error.map(EventProcessor.reason(of:))
        if let apnsID = response?.apnsID { result.apnsID = apnsID }
        if let requestID = response?.requestID { result.apnsRequestID = requestID }
        if let uniqueID = response?.apnsUniqueID { result.apnsUniqueID = uniqueID }

        switch attempt.outcome {
        case .delivered:
            if let credential = attempt.credential { effect(.credentialHealthy(credential)) }
            result.outcome = .delivered
            result.reason = nil
            verdict = .final(deadLetter: false)
        case .unregistered(let timestamp):
            result.outcome = .unregistered
            result.apnsTimestamp = timestamp
            verdict = .final(deadLetter: false)
        case .rejected(let reason):
            result.outcome = .rejected
            result.reason = reason?.description ?? result.reason
            result.detail =
                response.map { answer in
                    "APNs answered \(answer.status)"
                        + (answer.reason.map { reason in " \(reason)" + (reason.meaning.map { ": \($0)" } ?? "") } ?? "")
                } ?? attempt.error.map { "\($0)" }
            verdict = .final(deadLetter: false)
        case .credentialsBroken(let reason):
            if let credential = attempt.credential { effect(.credentialBroken(credential, reason: reason)) }
            effect(.credentialsRefused(credential: attempt.credential, reason: reason))
            result.outcome = .failed
            result.reason = result.reason ?? reason
            if response != nil {
                result.detail =
                    "APNs refused the provider credentials (\(reason)"
                    + (response?.reason?.meaning.map { ": \($0)" } ?? "") + "); fix them, then replay"
            } else {
                // No answer: the connection could not be made as configured (the server's
                // certificate did not verify, no HTTP/2); the outcome says where to look.
                result.detail = "\(attempt.outcome); then replay"
            }
            result.deadLetter = .credentials
            markFailure(now())
            verdict = .final(deadLetter: true)
        case .refreshToken:
            // Tokens follow a schedule every process shares: the first time, try again at once (a
            // connection may have moved to the next period's token meanwhile). Again and again means
            // APNs finds the schedule's token an hour old: this machine's clock is behind by more
            // than the schedule's margin. Back off like any retry instead of a burst of requests,
            // and say so.
            markFailure(now())
            effect(.retryScheduled(.providerToken))
            tokenRefreshes += 1
            if result.attempts >= policy.maxAttempts {
                exhausted()
            } else if tokenRefreshes == 1 {
                verdict = .retryNow
            } else {
                effect(.clockBehind(credential: attempt.credential))
                verdict = .retry(after: policy.backoffCeiling(afterAttempt: result.attempts))
            }
        case .retryLater(let perDeviceToken, _):
            let time = now()
            markFailure(time)
            let decision = policy.decide(
                attempts: result.attempts, elapsed: elapsed(), expiration: event.expiration,
                now: Int64(time.timeIntervalSince1970), draw: draw)
            switch decision {
            case .retry(let wait):
                effect(.retryScheduled(EventProcessor.cause(attempt)))
                if perDeviceToken {
                    // The limit is the token's: every event for it waits, not only this one; the
                    // next attempt waits for the throttle.
                    let ceiling = policy.backoffCeiling(afterAttempt: result.attempts)
                    effect(.throttleDevice(key: event.recipientKey ?? "", wait: max(wait, ceiling / 2)))
                    verdict = .retryNow
                } else {
                    verdict = .retry(after: wait)
                }
            case .exhausted:
                exhausted()
            case .expired:
                result.outcome = .expired
                verdict = .final(deadLetter: false)
            }
        }
    }

    /// The client refused before sending: nothing reached APNs, and the attempt does not count.
    /// Returns false for an attempt that was sent (or failed on the way).
    private mutating func refusedBeforeSending(
        _ attempt: SendAttempt, event: Event, now: () -> Date, effect: (Effect) -> Void
    ) -> Bool {
        if let error = attempt.error as? APNsNotificationError {
            // A rule that depends on the credential the topic routes to (a location push needs
            // token authentication). The fix is a credential that can send it, then replay.
            result.outcome = .rejected
            result.status = nil
            result.reason = error.code.rawValue
            result.detail =
                "\(EventProblem.pointer(for: error.field)): \(error.message); "
                + "configure a credential that can send it for topic \(event.topic), then replay"
            result.deadLetter = .noCredential
        } else if let error = attempt.error as? APNsClientError, error.code == .noCredentialForTopic {
            // Nothing is wrong with any credential: this worker is not configured for the event's
            // app. Readiness and the credential gauges stay as they are (their labels come from
            // configuration only, never from event data).
            result.outcome = .rejected
            result.reason = APNsClientError.Code.noCredentialForTopic.rawValue
            result.detail =
                "no configured credential matches topic \(event.topic); add one to apns.credentials, then replay"
            result.deadLetter = .noCredential
        } else if let error = attempt.error as? APNsCredentialError {
            // The credential cannot be used as it is (a certificate expired or not yet valid). The
            // fix is a new key or certificate, then replay.
            let credential = attempt.credential ?? "?"
            effect(.credentialBroken(credential, reason: error.code.rawValue))
            effect(.credentialUnusable(credential: credential, message: error.message))
            result.credential = attempt.credential
            result.outcome = .failed
            result.status = nil
            result.reason = error.code.rawValue
            result.detail = "credential \(credential): \(error.message); replace it, then replay"
            result.deadLetter = .credentials
        } else {
            return false
        }
        markFailure(now())
        verdict = .final(deadLetter: true, sent: false)
        return true
    }

    private mutating func exhausted() {
        result.outcome = .failed
        result.deadLetter = .retriesExhausted
        let last =
            result.status.map { "last answer \($0) \(result.reason ?? "")" }
            ?? "last failure \(result.reason ?? "unknown")"
        result.detail = "gave up after \(result.attempts) attempts; \(last)"
        verdict = .final(deadLetter: true)
    }

    private mutating func markFailure(_ now: Date) {
        if result.firstFailureAt == nil { result.firstFailureAt = now }
        result.lastFailureAt = now
    }
}
