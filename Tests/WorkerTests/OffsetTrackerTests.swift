import Kafka
import Testing

@testable import Worker

@Suite("Offset tracking: commit only the done prefix")
struct OffsetTrackerTests {
    let p0 = KafkaTopicPartition(topic: "events", partition: 0)
    let p1 = KafkaTopicPartition(topic: "events", partition: 1)

    @Test("the commit offset is the lowest one still in flight, and is committed only once")
    func commitsTheLowestOffsetStillInFlight() {
        var tracker = OffsetTracker()
        for offset in 10..<15 { tracker.start(p0, offset: Int64(offset)) }
        #expect(tracker.inFlight == 5)
        #expect(tracker.commitCandidates().isEmpty, "nothing done yet")

        tracker.finish(p0, offset: 12)
        tracker.finish(p0, offset: 14)
        // 10 is still in flight: the offset stays there, and the records done above it go with it.
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 10)])
        #expect(tracker.commitCandidates().first?.done == OffsetRanges([12..<13, 14..<15]))

        tracker.finish(p0, offset: 10)
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 11)])
        tracker.finish(p0, offset: 11)
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 13)])
        tracker.markCommitted(tracker.commitCandidates())
        #expect(tracker.commitCandidates().isEmpty, "already committed")

        tracker.finish(p0, offset: 13)
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 15)])
        #expect(tracker.inFlight == 0)
    }

    @Test("gaps between offsets do not hold back the commit")
    func gapsInOffsetsDoNotBlockTheCommit() {
        var tracker = OffsetTracker()
        for offset: Int64 in [3, 7, 8, 20] { tracker.start(p0, offset: offset) }
        tracker.finish(p0, offset: 3)
        tracker.finish(p0, offset: 7)
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 8)])
        tracker.finish(p0, offset: 20)
        tracker.finish(p0, offset: 8)
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 21)])
    }

    @Test("partitions commit independently; a revoked one is forgotten and its late results refused")
    func partitionsAreIndependentAndRevokedOnesAreForgotten() {
        var tracker = OffsetTracker()
        tracker.start(p0, offset: 0)
        tracker.start(p1, offset: 0)
        tracker.start(p1, offset: 1)
        tracker.finish(p1, offset: 0)
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p1, offset: 1)])
        #expect(tracker.commitCandidates(in: [p0]).isEmpty)
        #expect(tracker.inFlight(in: [p0, p1]) == 2)

        tracker.remove([p1])
        #expect(tracker.inFlight == 1)
        let lateRevoked = tracker.finish(p1, offset: 1)
        #expect(!lateRevoked, "a revoked partition's late result is not tracked")
        let unknown = tracker.finish(p0, offset: 99)
        #expect(!unknown, "an unknown offset is refused")
        let known = tracker.finish(p0, offset: 0)
        #expect(known)
        #expect(tracker.inFlight == 0)
    }

    @Test("a repeated or older offset is not tracked again, and finishing one twice is refused")
    func aRepeatedOrOlderOffsetIsIgnored() {
        var tracker = OffsetTracker()
        tracker.start(p0, offset: 5)
        tracker.start(p0, offset: 5)
        tracker.start(p0, offset: 4)
        #expect(tracker.inFlight == 1)
        tracker.finish(p0, offset: 5)
        let twice = tracker.finish(p0, offset: 5)
        #expect(!twice, "finishing twice is refused")
        #expect(tracker.inFlight == 0)
    }

    @Test("forgetting a partition leaves every other partition's records and commit point as they were")
    func forgettingOnePartitionKeepsTheOthers() {
        let p2 = KafkaTopicPartition(topic: "events", partition: 2)
        var tracker = OffsetTracker()
        for offset: Int64 in 0..<3 {
            tracker.start(p0, offset: offset)
            tracker.start(p1, offset: 10 + offset)
            tracker.start(p2, offset: 20 + offset)
        }
        tracker.finish(p1, offset: 10)
        tracker.finish(p2, offset: 20)
        tracker.finish(p2, offset: 21)

        tracker.remove([p0])
        #expect(tracker.inFlight == 3)
        #expect(tracker.inFlight(in: [p0]) == 0)
        #expect(tracker.inFlight(in: [p1]) == 2)
        #expect(tracker.inFlight(in: [p2]) == 1)
        #expect(
            tracker.commitCandidates().map(\.position) == [
                KafkaTopicPartitionOffset(p1, offset: 11), KafkaTopicPartitionOffset(p2, offset: 22),
            ])

        // Both go on being tracked where they were, and p0 starts afresh when it comes back.
        let p2Finished = tracker.finish(p2, offset: 22)
        let p1Finished = tracker.finish(p1, offset: 11)
        #expect(p2Finished && p1Finished)
        tracker.start(p0, offset: 7)
        let stale = tracker.finish(p0, offset: 0)
        #expect(!stale, "p0's records from before it was forgotten are not tracked")
        #expect(tracker.inFlight == 2)
        #expect(
            tracker.commitCandidates().map(\.position) == [
                KafkaTopicPartitionOffset(p1, offset: 12), KafkaTopicPartitionOffset(p2, offset: 23),
            ])
        tracker.remove([p2, p1])
        #expect(tracker.inFlight == 1)
        let p0Finished = tracker.finish(p0, offset: 7)
        #expect(p0Finished)
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 8)])
    }

    @Test("records the last owner finished are not run again, and stay recorded until read")
    func knownDoneRecords() {
        var tracker = OffsetTracker()
        // Committed 10; 11 to 13 and 20 done above it.
        tracker.seed(p0, committed: 10, done: OffsetRanges([11..<14, 20..<21]))
        #expect(tracker.start(p0, offset: 10) == .run)
        #expect(tracker.start(p0, offset: 11) == .alreadyDone)
        #expect(tracker.inFlight == 1)
        // Nothing new finished: the commit would say what the broker has (10, 11-13 and 20 done).
        let first = tracker.commitCandidates()
        #expect(first.map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 10)])
        #expect(first.first?.done == OffsetRanges([11..<14, 20..<21]), "not read yet, still done")
        tracker.markCommitted(first)
        #expect(tracker.commitCandidates().isEmpty)
        tracker.finish(p0, offset: 10)
        #expect(tracker.start(p0, offset: 12) == .alreadyDone)
        #expect(tracker.start(p0, offset: 13) == .alreadyDone)
        #expect(tracker.start(p0, offset: 14) == .run)
        #expect(tracker.commitCandidates().map(\.position) == [KafkaTopicPartitionOffset(p0, offset: 14)])
        #expect(tracker.commitCandidates().first?.done == OffsetRanges([20..<21]))
    }

    @Test("a record below the committed offset (the position was reset) drops what was known done")
    func resetDropsKnownDone() {
        var tracker = OffsetTracker()
        tracker.seed(p0, committed: 10, done: OffsetRanges([11..<14]))
        var started: [PartitionOffsets.Start] = []
        for offset: Int64 in 0..<14 { started.append(tracker.start(p0, offset: offset)) }
        #expect(started == Array(repeating: .run, count: 14), "a recreated topic read from its start")
    }

    @Test("a record released at a hand-over is not waited for, and the commit stays below it")
    func releasedRecords() {
        var tracker = OffsetTracker()
        for offset: Int64 in 0..<4 { tracker.start(p0, offset: offset) }
        tracker.finish(p0, offset: 0)
        tracker.finish(p0, offset: 2)
        tracker.finish(p0, offset: 3)
        let released = tracker.abandon(p0, offset: 1)
        #expect(released)
        #expect(tracker.inFlight(in: [p0]) == 0, "nothing to wait for")
        let candidate = tracker.commitCandidates().first
        #expect(candidate?.offset == 1 && candidate?.done == OffsetRanges([2..<4]), "1 is the next owner's")
        let late = tracker.finish(p0, offset: 1)
        #expect(!late, "released: its late result does not count")
    }
}
