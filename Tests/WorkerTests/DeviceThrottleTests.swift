import Testing

@testable import Worker

@Suite("429 back-off per device token")
struct DeviceThrottleTests {
    let start = ContinuousClock.now

    @Test("only the throttled device token waits, and only until its deadline")
    func onlyTheThrottledTokenWaits() {
        var throttle = DeviceThrottle<ContinuousClock.Instant>()
        throttle.throttle("aa", now: start, wait: .seconds(2))
        #expect(throttle.delay(for: "aa", now: start) == .seconds(2))
        #expect(throttle.delay(for: "aa", now: start + .seconds(1.5)) == .milliseconds(500))
        #expect(throttle.delay(for: "aa", now: start + .seconds(2)) == nil)
        #expect(throttle.delay(for: "bb", now: start) == nil)
    }

    @Test("a shorter throttle never shortens a longer one for the same token")
    func aShorterThrottleNeverShortensALongerOne() {
        var throttle = DeviceThrottle<ContinuousClock.Instant>()
        throttle.throttle("aa", now: start, wait: .seconds(10))
        throttle.throttle("aa", now: start, wait: .seconds(1))
        #expect(throttle.delay(for: "aa", now: start) == .seconds(10))
    }

    @Test("the throttle table stays bounded, keeping the latest deadlines, and pruning empties it")
    func theTableStaysBounded() {
        var throttle = DeviceThrottle<ContinuousClock.Instant>(capacity: 100)
        for index in 0..<1_000 {
            throttle.throttle("token\(index)", now: start, wait: .seconds(Double(index)))
        }
        #expect(throttle.count <= 100)
        // The latest deadlines are the ones kept.
        #expect(throttle.delay(for: "token999", now: start) != nil)
        throttle.prune(now: start + .seconds(5_000))
        #expect(throttle.count == 0)
    }
}
