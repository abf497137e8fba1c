import APNs
import Foundation
import Testing

@testable import Worker

/// The answer decision alone: plain inputs in, a result, a verdict and effects out.
@Suite("Answer decision: what an APNs answer makes of an event, from plain inputs")
struct AnswerDecisionTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    var policy: RetryPolicy {
        var policy = RetryPolicy()
        policy.maxAttempts = 3
        policy.initialBackoff = .seconds(1)
        policy.maxBackoff = .seconds(8)
        return policy
    }

    func answer(_ status: Int, _ reason: APNsReason? = nil) -> SendAttempt {
        let response = APNsResponse(status: status, apnsID: nil, reason: reason)
        return SendAttempt(
            response: response, error: nil, outcome: .classify(response), credential: "app", duration: .milliseconds(30)
        )
    }

    func decide(
        _ attempt: SendAttempt, attempts: Int, tokenRefreshes: Int = 0, expiration: APNsExpiration? = nil,
        elapsed: Duration = .zero
    ) -> (decision: AnswerDecision, effects: [AnswerDecision.Effect]) {
        let event = AnswerDecision.Event(topic: "com.example.app", recipientKey: "token-1", expiration: expiration)
        var effects: [AnswerDecision.Effect] = []
        // The jitter's draw is its top: the wait is the backoff's ceiling itself.
        let decision = AnswerDecision.decide(
            attempt, result: EventResult(eventID: "e1", outcome: .failed, attempts: attempts),
            tokenRefreshes: tokenRefreshes, event: event, policy: policy, now: { now }, elapsed: { elapsed },
            draw: { $0 },
            effect: { effects.append($0) })
        return (decision, effects)
    }

    @Test("a 429 for the device token throttles the token and tries again through the gate; the wait is the backoff")
    func deviceThrottle() {
        let (decision, effects) = decide(answer(429, .tooManyRequests), attempts: 2)
        #expect(decision.verdict == .retryNow)
        #expect(effects.contains(.throttleDevice(key: "token-1", wait: .seconds(2))))
        #expect(effects.contains(.retryScheduled(.tooManyRequests)))
        #expect(decision.result.firstFailureAt == now && decision.result.status == 429)
    }

    @Test("a 503 on the last attempt gives up: failed, dead-lettered, and the detail names the last answer")
    func exhausted() {
        let (decision, _) = decide(answer(503, .serviceUnavailable), attempts: 3)
        #expect(decision.verdict == .final(deadLetter: true))
        #expect(decision.result.outcome == .failed && decision.result.deadLetter == .retriesExhausted)
        #expect(decision.result.detail == "gave up after 3 attempts; last answer 503 ServiceUnavailable")
    }

    @Test("a retry the notification's expiration would pass ends expired, without a dead letter")
    func expired() {
        let (decision, _) = decide(
            answer(503), attempts: 1, expiration: APNsExpiration(secondsSince1970: 1_800_000_001))
        #expect(decision.verdict == .final(deadLetter: false) && decision.result.outcome == .expired)
    }

    @Test("ExpiredProviderToken: the first at once, the second backs off and says to check the clock")
    func expiredToken() {
        let (first, firstEffects) = decide(answer(403, .expiredProviderToken), attempts: 1)
        #expect(first.verdict == .retryNow && first.tokenRefreshes == 1)
        #expect(!firstEffects.contains(.clockBehind(credential: "app")))
        let (second, secondEffects) = decide(answer(403, .expiredProviderToken), attempts: 2, tokenRefreshes: 1)
        #expect(second.verdict == .retry(after: .seconds(2)))
        #expect(secondEffects.contains(.clockBehind(credential: "app")))
    }

    @Test("delivered: the credential is healthy, the result delivered, no failure time")
    func delivered() {
        let (decision, effects) = decide(answer(200), attempts: 1)
        #expect(decision.verdict == .final(deadLetter: false))
        #expect(
            effects == [
                .answered(status: 200, reason: nil, credential: "app", duration: .milliseconds(30)),
                .credentialHealthy("app"),
            ])
        #expect(decision.result.outcome == .delivered && decision.result.firstFailureAt == nil)
    }
}
