import Kafka
import Testing

@testable import Worker

/// What a member finished in a partition and could not store, when the group gives the partition
/// back: each case here was found by the deterministic simulation (Tests/SimulationTests), and the
/// seed that found it is named.
@Suite("Owed progress: a partition given back to the member that finished its records")
struct OwedProgressTests {
    let p0 = KafkaTopicPartition(topic: "events", partition: 0)

    /// Done records of `partition` when it starts from what the broker stores and what is owed.
    func done(_ progress: [KafkaTopicPartition: KnownProgress], _ partition: KafkaTopicPartition) -> [Int64] {
        guard let known = progress[partition] else { return [] }
        return known.done.ranges.flatMap { Array($0) }
    }

    // Simulation seeds 69 and 117: the event at the committed offset was still in flight when the
    // assignment was lost, those above it had finished; given back, the member pushed them again.
    @Test(
        "records finished above an event still in flight at the committed offset are not run again when the partition comes back"
    )
    func owedAtTheCommittedOffset() {
        var state = WorkerPipeline.StateMachine(maxInFlight: 10)
        _ = state.assign([p0], tenure: 1, progress: [p0: KnownProgress(committed: 3, done: OffsetRanges())])
        let lease = state.ownership.lease(of: p0)!
        for offset in Int64(3)...5 { _ = state.admit(p0, offset: offset, lease: lease) }
        _ = state.finish(p0, offset: 5, lease: lease)
        let committed = state.commitCandidates(in: nil)
        #expect(committed.map(\.offset) == [3] && committed.first?.done == OffsetRanges([5..<6]))
        state.markCommitted(committed)
        _ = state.finish(p0, offset: 4, lease: lease)  // after the commit: only this member knows
        _ = state.revoke([p0])  // lost: nothing more is committed
        _ = state.abandon(p0, offset: 3, lease: lease)
        _ = state.forget([p0])

        let owed = state.takeOwed([p0])
        let read = [p0: KnownProgress(committed: 3, done: OffsetRanges([5..<6]))]
        let progress = KnownProgress.starting([p0], committed: [p0: 3], read: read, owed: owed)
        #expect(done(progress, p0) == [4, 5], "4 finished here after the last commit")
        #expect(progress[p0]?.committed == 3, "3 never finished: it runs")
    }

    // Simulation seed 294: a lease that started knowing record 0 done (owed, nothing committed yet)
    // was revoked before it read a record; the next lease knew nothing and pushed 0 again.
    @Test("a partition that starts knowing records done and is let go before reading one still owes them")
    func seededAndLetGoBeforeReading() {
        var state = WorkerPipeline.StateMachine(maxInFlight: 10)
        _ = state.assign([p0], tenure: 1, progress: [p0: KnownProgress(committed: 0, done: OffsetRanges([0..<1]))])
        #expect(state.commitCandidates(in: nil).map(\.offset) == [1], "the known record is committed, read or not")
        _ = state.revoke([p0])
        _ = state.forget([p0])

        let owed = state.takeOwed([p0])
        #expect(owed[p0]?.candidate.offset == 1 && owed[p0]?.start == 0)
        let progress = KnownProgress.starting([p0], committed: [:], read: [:], owed: owed)
        #expect(progress[p0]?.committed == 0 && done(progress, p0) == [0])
    }

    // A topic deleted and recreated drops its committed offsets; given back to the member that owed
    // progress there, from a lease that began at the partition's first offset, the owed records would
    // name the new topic's records as done (the position never goes below where that lease began,
    // so `PartitionOffsets`' reset guard does not see it).
    @Test("progress owed on a topic recreated since is checked against the partition's end: its new records run")
    func owedOnARecreatedTopic() {
        var state = WorkerPipeline.StateMachine(maxInFlight: 10)
        _ = state.assign([p0], tenure: 1)  // nothing committed: read from the partition's first offset
        let lease = state.ownership.lease(of: p0)!
        for offset in Int64(0)..<8 { _ = state.admit(p0, offset: offset, lease: lease) }
        for offset in Int64(1)..<8 { _ = state.finish(p0, offset: offset, lease: lease) }
        _ = state.revoke([p0])  // lost before its first commit was stored
        _ = state.abandon(p0, offset: 0, lease: lease)
        _ = state.forget([p0])
        let owed = state.takeOwed([p0])
        #expect(owed[p0]?.start == 0)

        // Recreated: nothing committed, three records so far.
        let starting = StartingProgress(
            partitions: [p0], committed: [:], read: [:], owed: owed,
            bounds: DoneRecordBounds(maxInFlight: 10, maxParked: nil))
        #expect(starting.tops[p0] == 8, "the end is learnt for owed progress too")
        let decision = starting.decided(ends: [p0: 3])
        #expect(done(decision.progress, p0) == [], "records 1 and 2 of the new topic would be skipped")
        #expect(decision.refused.map(\.refusal) == [.pastEnd])
    }

    @Test("owed progress that cannot be true is refused, and what was read back still counts")
    func owedRefusedReadKept() {
        let owed = [
            p0: OwedProgress(
                candidate: CommitCandidate(partition: p0, offset: 5, done: OffsetRanges([7..<40]), version: 1),
                start: 0)
        ]
        let read = [p0: KnownProgress(committed: 3, done: OffsetRanges([4..<5]))]
        let starting = StartingProgress(
            partitions: [p0], committed: [p0: 3], read: read, owed: owed,
            bounds: DoneRecordBounds(maxInFlight: 10, maxParked: nil))
        let decision = starting.decided(ends: [p0: 20])
        #expect(done(decision.progress, p0) == [4], "what the owed progress adds reaches past the end: dropped")
        #expect(decision.refused.map(\.refusal) == [.pastEnd])
    }
}
