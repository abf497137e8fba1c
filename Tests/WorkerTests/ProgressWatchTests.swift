import Testing

@testable import Worker

// Liveness used to come from a timer that always beat: a stuck reader, poll thread or event kept
// /health/live green forever.
@Suite("Liveness is progress")
struct ProgressWatchTests {
    let polling: Duration = .milliseconds(100)

    @Test("idle with a polling consumer: alive at every tick")
    func idleIsAlive() {
        var watch = LivenessWatch()
        var beats: [Bool] = []
        for _ in 0..<3 { beats.append(watch.alive(steps: 7, pending: false, sincePolled: polling)) }
        #expect(beats == [true, true, true])
    }

    @Test("work pending: alive only at ticks after a step (a stuck reader or event stops the beats)")
    func pendingNeedsSteps() {
        var watch = LivenessWatch()
        let beats = [1, 5, 5, 5, 6].map { watch.alive(steps: $0, pending: true, sincePolled: polling) }
        // The first tick has no past; then records wait and none is taken; then a step again.
        #expect(beats == [true, true, false, false, true])
    }

    @Test("a poll thread that stopped going round: not alive, even with nothing pending")
    func stuckPollThread() {
        var watch = LivenessWatch(pollStall: .seconds(15))
        let beats = [
            watch.alive(steps: 1, pending: false, sincePolled: .seconds(16)),
            watch.alive(steps: 2, pending: true, sincePolled: .seconds(40)),
            watch.alive(steps: 3, pending: true, sincePolled: .seconds(1)),
        ]
        #expect(beats == [false, false, true])
    }
}
