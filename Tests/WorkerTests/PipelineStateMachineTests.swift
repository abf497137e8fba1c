import Kafka
import Testing

@testable import Worker

@Suite("Pipeline state: backpressure and drains")
struct PipelineStateMachineTests {
    let p0 = KafkaTopicPartition(topic: "events", partition: 0)
    let p1 = KafkaTopicPartition(topic: "events", partition: 1)

    @Test func pausesAtTheBoundAndResumesAtHalf() async {
        var state = PipelineStateMachine(maxInFlight: 4)
        let admitted = (0..<4).map { state.admit(p0, offset: Int64($0)) }
        #expect(admitted == [false, false, false, true], "the fourth fills the bound")
        #expect(state.paused)

        // The reader parks; finishing one event is not enough, finishing two (down to half) resumes.
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let mayRead = state.mayRead(waiter)
            #expect(!mayRead)
            let first = state.finish(p0, offset: 0)
            #expect(first.resume == nil && !first.resumeConsumer)
            let second = state.finish(p0, offset: 1)
            #expect(second.resumeConsumer)
            second.resume?.resume()
        }
        #expect(!state.paused)
        #expect(state.tracker.commitCandidates() == [KafkaTopicPartitionOffset(p0, offset: 2)])
    }

    @Test func aRevocationWaitsOnlyForItsOwnPartitions() async {
        var state = PipelineStateMachine(maxInFlight: 100)
        _ = state.admit(p0, offset: 0)
        _ = state.admit(p1, offset: 0)
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let drainedAtOnce = state.waitForDrain(of: [p0], waiter)
            #expect(!drainedAtOnce)
            let other = state.finish(p1, offset: 0)
            #expect(other.drained.isEmpty, "p1 finishing does not drain p0")
            let action = state.finish(p0, offset: 0)
            #expect(action.drained.count == 1)
            action.drained.forEach { $0.resume() }
        }
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let drainedAtOnce = state.waitForDrain(of: nil, waiter)
            #expect(drainedAtOnce, "nothing running: drained at once")
            waiter.resume()
        }
    }

    @Test func aForgottenPartitionsLateEventsStillCountForBackpressureButNotForCommits() {
        var state = PipelineStateMachine(maxInFlight: 2)
        _ = state.admit(p0, offset: 5)
        state.forget([p0])
        #expect(state.running == 1)
        _ = state.finish(p0, offset: 5)
        #expect(state.running == 0)
        #expect(state.tracker.commitCandidates().isEmpty)
    }

    @Test func aTimedOutDrainWaitCanBeCancelled() async {
        var state = PipelineStateMachine(maxInFlight: 10)
        _ = state.admit(p0, offset: 0)
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let drainedAtOnce = state.waitForDrain(of: [p0], waiter)
            #expect(!drainedAtOnce)
            let cancelled = state.cancelDrainWait { $0 == [p0] }
            #expect(cancelled.count == 1)
            cancelled.forEach { $0.resume() }
        }
    }
}
