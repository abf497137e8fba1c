import APNs
import Testing

@testable import Worker

@Suite("Retry policy: exponential backoff, full jitter, limits, expiration")
struct RetryPolicyTests {
    @Test("the backoff ceiling doubles from the initial backoff up to the cap, without overflow")
    func ceilingDoublesUpToTheCap() {
        var policy = RetryPolicy()
        policy.initialBackoff = .milliseconds(100)
        policy.maxBackoff = .seconds(2)
        let ceilings = (1...7).map { policy.backoffCeiling(afterAttempt: $0) }
        #expect(
            ceilings == [
                .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800),
                .milliseconds(1600), .seconds(2), .seconds(2),
            ])
        #expect(policy.backoffCeiling(afterAttempt: 1000) == .seconds(2), "no overflow on huge attempt counts")
    }

    @Test("full jitter: waits are spread over the whole range from zero to the ceiling")
    func jitterIsSpreadOverTheWholeRange() {
        var policy = RetryPolicy()
        policy.initialBackoff = .seconds(1)
        policy.maxAttempts = 100
        var random = NotificationEventRobustnessTests.SplitMix64(state: 42)
        var waits: [Duration] = []
        for _ in 0..<2000 {
            guard
                case .retry(let wait) = policy.decide(
                    attempts: 1, elapsed: .zero, expiration: nil, now: 0, using: &random)
            else { Issue.record("expected a retry"); return }
            waits.append(wait)
        }
        #expect(waits.allSatisfy { $0 >= .zero && $0 <= .seconds(1) })
        // Full jitter: the waits cover the range, not bunch at its top.
        #expect(waits.filter { $0 < .milliseconds(250) }.count > 300)
        #expect(waits.filter { $0 > .milliseconds(750) }.count > 300)
    }

    @Test("retries stop after maxAttempts attempts or maxRetryDuration, whichever comes first")
    func attemptsAndTimeAreBounded() {
        var policy = RetryPolicy()
        policy.maxAttempts = 3
        policy.maxRetryDuration = .seconds(10)
        var random = NotificationEventRobustnessTests.SplitMix64(state: 7)
        #expect(policy.decide(attempts: 3, elapsed: .zero, expiration: nil, now: 0, using: &random) == .exhausted)
        #expect(
            policy.decide(attempts: 1, elapsed: .seconds(11), expiration: nil, now: 0, using: &random) == .exhausted)
        guard case .retry = policy.decide(attempts: 2, elapsed: .seconds(1), expiration: nil, now: 0, using: &random)
        else {
            Issue.record("two attempts of three, one second in: retry")
            return
        }
    }

    @Test("a notification that expires before the next attempt ends expired; apns-expiration 0 never does")
    func aNotificationThatExpiresBeforeTheNextAttemptIsExpired() {
        var policy = RetryPolicy()
        policy.initialBackoff = .seconds(4)
        var random = NotificationEventRobustnessTests.SplitMix64(state: 1)
        let now: Int64 = 1_000_000
        #expect(
            policy.decide(attempts: 1, elapsed: .zero, expiration: .at(secondsSince1970: now), now: now, using: &random)
                == .expired)
        #expect(
            policy.decide(
                attempts: 1, elapsed: .zero, expiration: .at(secondsSince1970: now - 60), now: now, using: &random)
                == .expired)
        guard
            case .retry = policy.decide(
                attempts: 1, elapsed: .zero, expiration: .at(secondsSince1970: now + 3600), now: now, using: &random)
        else {
            Issue.record("an hour left: retry")
            return
        }
        // 0 means "deliver once, do not store": it never expires while retrying.
        guard
            case .retry = policy.decide(attempts: 1, elapsed: .zero, expiration: .immediately, now: now, using: &random)
        else {
            Issue.record("apns-expiration 0 does not expire")
            return
        }
    }
}
