import Foundation
import Kafka
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// Done records read back are trusted only as far as they could be true: none at or past the
/// partition's end when it is assigned, and no more stretches left not done inside them than the
/// writer could have had unfinished. A record beyond either (forged by a principal with write
/// access, or an old one of a recreated topic whose committed offset happens to match) would make
/// every later owner skip those offsets: no push, no result.
@Suite("Done records read back: bounded", .serialized, .timeLimit(.minutes(3)))
struct DoneRecordBoundsTests {
    /// Twenty alerts in the one partition; offset 0 committed for `group` with `done` as its metadata;
    /// a worker (at most `maxInFlight` in flight) run until every event has its result. Returns the
    /// offsets with a result, and how many pushes APNs received.
    func run(group: String, done: OffsetRanges, maxInFlight: Int = 2000) async throws -> (offsets: [Int64], pushes: Int)
    {
        let harness = try await Harness.start(broker: .mock, partitions: 1)
        defer { Task { await harness.shutdown() } }
        let ids = (0..<20).map { _ in UUID().uuidString.lowercased() }
        for index in 0..<20 { harness.stack.simulator.devices.register(Samples.deviceToken(index)) }
        try await harness.produce(ids.enumerated().map { Samples.alert(id: $1, deviceToken: Samples.deviceToken($0)) })
        try await harness.commit(
            group: group, offset: 0, metadata: CommitMetadata(committed: 0, done: done).encoded().text)
        let worker = try harness.startWorker(group: group, maxInFlight: maxInFlight)
        try await eventually(60, "offsets committed to the end") {
            try await harness.commitProgress(group: group).allSatisfy { $0.committed == $0.end }
        }
        try await worker.stop()
        let offsets = try await harness.allRecords(of: EmbeddedStack.resultsTopic).map {
            try ResultRecord($0).sourceOffset
        }
        return (offsets.sorted(), harness.stack.simulator.observation.records.count)
    }

    @Test("done offsets far past the partition's end in the metadata: refused, every event pushed once")
    func pastTheEnd() async throws {
        let (offsets, pushes) = try await run(group: "past-end", done: OffsetRanges([1..<Int64.max / 4 - 2]))
        #expect(offsets == Array(0..<20), "events skipped without a result")
        #expect(pushes == 20)
    }

    @Test("more stretches left not done inside the done records than the writer could have had unfinished: refused")
    func tooManyGaps() async throws {
        // In flight at most 2 (and as many parked), doubled: a writer could not have left 9 stretches
        // unfinished below a done record.
        let alternate = stride(from: Int64(1), through: 17, by: 2).map { $0..<$0 + 1 }
        let (offsets, pushes) = try await run(group: "gaps", done: OffsetRanges(alternate), maxInFlight: 2)
        #expect(offsets == Array(0..<20), "events skipped without a result")
        #expect(pushes == 20)
    }

    @Test("done records within both bounds are trusted: not pushed again")
    func withinTheBounds() async throws {
        let (offsets, pushes) = try await run(group: "within", done: OffsetRanges([2..<10, 12..<19]))
        #expect(offsets == [0, 1, 10, 11, 19])
        #expect(pushes == 5)
    }
}
