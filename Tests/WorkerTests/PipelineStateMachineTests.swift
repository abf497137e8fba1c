import Kafka
import Testing

@testable import Worker

@Suite("Pipeline state: backpressure, ownership, drains and shutdown")
struct PipelineStateMachineTests {
    let p0 = KafkaTopicPartition(topic: "events", partition: 0)
    let p1 = KafkaTopicPartition(topic: "events", partition: 1)

    /// A machine that owns `partitions`, with their leases.
    func owning(_ partitions: [KafkaTopicPartition], maxInFlight: Int) -> (
        WorkerPipeline.StateMachine, [PartitionLease]
    ) {
        var state = WorkerPipeline.StateMachine(maxInFlight: maxInFlight)
        _ = state.assign(partitions, tenure: 1)
        return (state, partitions.map { state.ownership.lease(of: $0)! })
    }

    func ran(_ action: WorkerPipeline.StateMachine.AdmitAction) -> Bool? {
        if case .run(let pause, _) = action { return pause }
        return nil
    }

    @Test("input is held when events in flight reach the bound and flows again when they fall to half")
    func holdsAtTheBoundAndFlowsAtHalf() async {
        var (state, leases) = owning([p0], maxInFlight: 4)
        let admitted = (0..<4).map { ran(state.admit(p0, offset: Int64($0), lease: leases[0])) }
        #expect(admitted == [false, false, false, true], "the fourth fills the bound")
        #expect(state.inputHeld)

        // The reader parks; finishing one event is not enough, finishing two (down to half) resumes.
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let mayRead = state.readOrWait(waiter)
            #expect(!mayRead)
            let first = state.finish(p0, offset: 0, lease: leases[0])
            #expect(first.resume == nil && !first.holdEnded)
            let second = state.finish(p0, offset: 1, lease: leases[0])
            #expect(second.holdEnded)
            second.resume?.resume()
        }
        #expect(!state.inputHeld)
        #expect(state.commitCandidates(in: nil).map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 2)])
    }

    // In flight was bounded in events only: 2,000 events of 300 KB held 600 MB.
    @Test("large records reach the in-flight bound by bytes; input resumes when both count and bytes are at half")
    func byteBound() async {
        var state = WorkerPipeline.StateMachine(maxInFlight: 2000, maxInFlightBytes: 1_000_000)
        _ = state.assign([p0], tenure: 1)
        let lease = state.ownership.lease(of: p0)!
        let admitted = (0..<4).map { ran(state.admit(p0, offset: Int64($0), lease: lease, bytes: 300_000)) }
        #expect(admitted == [false, false, false, true], "the fourth passes 1 MB")
        #expect(state.inputHeld && state.running == 4)
        let first = state.finish(p0, offset: 0, lease: lease, bytes: 300_000)
        #expect(!first.holdEnded, "900 KB still running")
        let second = state.finish(p0, offset: 1, lease: lease, bytes: 300_000)
        #expect(!second.holdEnded, "600 KB: above half the bytes")
        let third = state.finish(p0, offset: 2, lease: lease, bytes: 300_000)
        #expect(third.holdEnded, "300 KB: half or less of both")
        #expect(!state.inputHeld && state.runningBytes == 300_000)
    }

    @Test("a revocation waits only for its own partitions to drain; with nothing running it drains at once")
    func aRevocationWaitsOnlyForItsOwnPartitions() async {
        var (state, leases) = owning([p0, p1], maxInFlight: 100)
        _ = state.admit(p0, offset: 0, lease: leases[0])
        _ = state.admit(p1, offset: 0, lease: leases[1])
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let drainedAtOnce = state.waitForDrain(of: [p0], waiter)
            #expect(!drainedAtOnce)
            let other = state.finish(p1, offset: 0, lease: leases[1])
            #expect(other.drained.isEmpty, "p1 finishing does not drain p0")
            let action = state.finish(p0, offset: 0, lease: leases[0])
            #expect(action.drained.count == 1)
            action.drained.forEach { $0.resume() }
        }
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let drainedAtOnce = state.waitForDrain(of: nil, waiter)
            #expect(drainedAtOnce, "nothing running: drained at once")
            waiter.resume()
        }
    }

    @Test("a forgotten partition's late events still count for backpressure, but are never committed")
    func aForgottenPartitionsLateEventsStillCountForBackpressureButNotForCommits() {
        var (state, leases) = owning([p0], maxInFlight: 2)
        _ = state.admit(p0, offset: 5, lease: leases[0])
        state.revoke([p0])
        let ended = state.forget([p0])
        #expect(ended.map(ObjectIdentifier.init) == [ObjectIdentifier(leases[0])], "the lease ends with the partition")
        #expect(state.running == 1)
        _ = state.finish(p0, offset: 5, lease: leases[0])
        #expect(state.running == 0)
        #expect(state.commitCandidates(in: nil).isEmpty)
        #expect(state.commitCandidates(in: [p0]).isEmpty)
    }

    @Test("a drain wait that timed out can be cancelled, resuming its waiter")
    func aTimedOutDrainWaitCanBeCancelled() async {
        var (state, leases) = owning([p0], maxInFlight: 10)
        _ = state.admit(p0, offset: 0, lease: leases[0])
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let drainedAtOnce = state.waitForDrain(of: [p0], waiter)
            #expect(!drainedAtOnce)
            let cancelled = state.cancelDrainWait { $0 == [p0] }
            #expect(cancelled.count == 1)
            cancelled.forEach { $0.resume() }
        }
    }

    // The reader, held at the bound with a record of p0 in hand, used to admit it after p0 had been
    // revoked and committed: this member pushed it (so did the new owner) and then committed past it
    // for a partition it no longer owned, over events that were not done.
    @Test("a record held across a revocation is not run, tracked or committed by the old owner")
    func aRecordHeldAcrossARevocationIsSkipped() {
        var (state, leases) = owning([p0], maxInFlight: 1)
        let first = state.admit(p0, offset: 0, lease: leases[0])
        #expect(ran(first) == true, "the bound is reached: pause")
        // The reader holds offset 1, read under p0's lease; meanwhile p0 is revoked and the first
        // event finishes.
        state.revoke([p0])
        _ = state.finish(p0, offset: 0, lease: leases[0])
        let held = state.admit(p0, offset: 1, lease: leases[0])
        #expect(ran(held) == nil, "no longer owned: skipped")
        #expect(state.running == 0)
        #expect(state.commitCandidates(in: nil).isEmpty, "nothing periodic for a partition being revoked")
        #expect(
            state.commitCandidates(in: [p0]).map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 1)],
            "only what finished")
        _ = state.forget([p0])

        // Assigned back: a new lease and fresh tracking. A record read under the old lease is not
        // admitted under the new one, and an old event finishing does not count for the new tenure.
        _ = state.assign([p0], tenure: 3)
        let fresh = state.ownership.lease(of: p0)!
        #expect(fresh !== leases[0])
        let stale = state.admit(p0, offset: 1, lease: leases[0])
        #expect(ran(stale) == nil)
        let current = state.admit(p0, offset: 0, lease: fresh)
        #expect(ran(current) != nil)
        #expect(state.commitCandidates(in: nil).isEmpty, "offset 0 of the new tenure is still running")
    }

    @Test("a partition assigned again while its old revocation is unfinished keeps its new tenure")
    func aLateForgetLeavesANewTenureAlone() {
        var (state, leases) = owning([p0], maxInFlight: 10)
        state.revoke([p0])
        _ = state.assign([p0], tenure: 3)  // the rebalance handler's bound passed; the partition is back
        let fresh = state.ownership.lease(of: p0)!
        _ = state.admit(p0, offset: 7, lease: fresh)
        let ended = state.forget([p0])  // the old revocation finishes late
        #expect(ended.isEmpty)
        #expect(state.ownership.lease(of: p0) === fresh)
        _ = state.finish(p0, offset: 7, lease: fresh)
        #expect(state.commitCandidates(in: nil).map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 8)])
        _ = leases
    }

    // The reader looked a record's lease up when it took the record, not when the consumer fetched
    // it: a record fetched before its partition was lost, taken after the partition was assigned
    // back, was admitted under the new lease. The new tenure then read the partition again from its
    // committed offset, below that record, and the tracker ignored those offsets.
    @Test("a record fetched in a tenure that ended finds no lease, even with its partition assigned back")
    func aRecordOfAnEndedTenureFindsNoLease() {
        var (state, leases) = owning([p0], maxInFlight: 10)
        #expect(state.lease(of: p0, readIn: 1) === leases[0])
        #expect(state.lease(of: p0, readIn: 2) === leases[0], "fetched later in the same tenure")
        state.revoke([p0])  // lost: tenure 2
        #expect(state.lease(of: p0, readIn: 1) == nil)
        _ = state.forget([p0])
        _ = state.assign([p0], tenure: 3)
        #expect(state.lease(of: p0, readIn: 1) == nil, "fetched before the loss")
        #expect(state.lease(of: p0, readIn: 2) == nil, "fetched between the loss and the new assignment")
        let fresh = state.lease(of: p0, readIn: 3)
        #expect(fresh != nil && fresh !== leases[0])
        #expect(fresh?.assignedIn == 3)
    }

    // SIGTERM while the reader waited at the bound: it was resumed only when half the in-flight
    // events finished, so under a 503 storm shutdown took minutes or never ended.
    @Test("shutdown wakes a reader waiting at the bound, and nothing more is admitted")
    func shutdownWakesTheReader() async {
        var (state, leases) = owning([p0], maxInFlight: 1)
        _ = state.admit(p0, offset: 0, lease: leases[0])
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let mayRead = state.readOrWait(waiter)
            #expect(!mayRead)
            let (began, reader) = state.beginStopping(deadline: .now + .seconds(30))
            #expect(began)
            #expect(reader != nil, "the waiting reader is handed back to be resumed")
            reader?.resume()
        }
        let again = state.beginStopping(deadline: .now).began
        #expect(!again, "one deadline: the first signal's")
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let mayRead = state.readOrWait(waiter)
            #expect(mayRead, "stopping: the reader never waits")
            waiter.resume()
        }
        let late = state.admit(p0, offset: 1, lease: leases[0])
        #expect(ran(late) == nil, "stopping: nothing is admitted")
    }

    @Test("a hold outlives the start of shutdown: draining to half ends it, with no reader to resume")
    func aHoldOutlivesTheStartOfShutdown() async {
        var (state, leases) = owning([p0], maxInFlight: 2)
        _ = state.admit(p0, offset: 0, lease: leases[0])
        _ = state.admit(p0, offset: 1, lease: leases[0])
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let mayRead = state.readOrWait(waiter)
            #expect(!mayRead)
            let (began, reader) = state.beginStopping(deadline: .now + .seconds(30))
            #expect(began && reader != nil, "the waiting reader is handed back")
            reader?.resume()
        }
        #expect(state.inputHeld, "input reads as paused until the bound drains")
        let action = state.finish(p0, offset: 0, lease: leases[0])
        #expect(action.holdEnded, "down to half: input flows")
        #expect(action.resume == nil, "stopping: no reader waits")
        #expect(!state.inputHeld)
    }

    @Test("an output topic blocked during shutdown holds input and counts toward the blocked limit")
    func aTopicBlockedDuringShutdown() {
        var (state, _) = owning([p0], maxInFlight: 10)
        let start = ContinuousClock.now
        _ = state.beginStopping(deadline: start + .seconds(30))
        let paused = state.block("results", now: start)
        #expect(paused)
        #expect(state.blockedLongest(now: start + .seconds(31), limit: .seconds(30))?.topic == "results")
        let action = state.unblock("results")
        #expect(action.holdEnded && action.resume == nil)
    }

    @Test("an output topic refusing every record holds input until it takes one again")
    func aBlockedTopicHoldsInput() async {
        var (state, _) = owning([p0], maxInFlight: 10)
        let start = ContinuousClock.now
        let first = state.block("results", now: start)
        #expect(first, "the first block pauses input")
        let second = state.block("dead-letters", now: start)
        #expect(!second, "already paused")
        #expect(state.inputHeld)
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let mayRead = state.readOrWait(waiter)
            #expect(!mayRead)
            let partly = state.unblock("results")
            #expect(partly.resume == nil, "another topic is still blocked")
            let action = state.unblock("dead-letters")
            #expect(action.holdEnded)
            action.resume?.resume()
        }
        #expect(!state.inputHeld)
        _ = state.block("results", now: start)
        #expect(state.blockedLongest(now: start + .seconds(10), limit: .seconds(30)) == nil)
        #expect(state.blockedLongest(now: start + .seconds(31), limit: .seconds(30))?.topic == "results")
    }
}
