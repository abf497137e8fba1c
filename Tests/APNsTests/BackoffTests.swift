import Testing

@testable import APNs

@Suite("Backoff")
struct BackoffTests {
    let first = Duration.milliseconds(100)
    let maximum = Duration.seconds(3)

    @Test("the ceiling doubles from the first step to the maximum, and stays there however many failures")
    func ceiling() {
        let backoff = Backoff(first: first, maximum: maximum, jitter: .none)
        #expect(backoff.ceiling(afterFailures: 0) == .zero)
        #expect(
            (1...7).map { backoff.ceiling(afterFailures: $0) } == [
                .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1600),
                .seconds(3), .seconds(3),
            ])
        #expect(backoff.ceiling(afterFailures: 10_000) == maximum, "no overflow")
    }

    @Test("each jitter draws within its bounds: full in [0, ceiling], equal in [ceiling/2, ceiling], none the ceiling")
    func bounds() {
        var generator = SystemRandomNumberGenerator()
        for failures in 1...8 {
            let ceiling = Backoff(first: first, maximum: maximum, jitter: .none).ceiling(afterFailures: failures)
            var fullSeen: [Duration] = []
            for _ in 0..<500 {
                let full = Backoff(first: first, maximum: maximum, jitter: .full).wait(
                    afterFailures: failures, using: &generator)
                let equal = Backoff(first: first, maximum: maximum, jitter: .equal).wait(
                    afterFailures: failures, using: &generator)
                #expect(full >= .zero && full <= ceiling)
                #expect(equal >= ceiling / 2 && equal <= ceiling)
                fullSeen.append(full)
            }
            #expect(Backoff(first: first, maximum: maximum, jitter: .none).wait(afterFailures: failures) == ceiling)
            #expect(fullSeen.contains { $0 < ceiling / 2 }, "full jitter reaches below half the ceiling")
        }
    }

    @Test("the extremes of the draw are the bounds")
    func extremes() {
        for (jitter, low, high) in [
            (Backoff.Jitter.full, Duration.zero, Duration.milliseconds(400)),
            (.equal, .milliseconds(200), .milliseconds(400)), (.none, .milliseconds(400), .milliseconds(400)),
        ] {
            let backoff = Backoff(first: first, maximum: maximum, jitter: jitter)
            #expect(backoff.wait(afterFailures: 3) { _ in 0 } == low, "\(jitter)")
            #expect(backoff.wait(afterFailures: 3) { $0 } == high, "\(jitter)")
        }
    }
}
