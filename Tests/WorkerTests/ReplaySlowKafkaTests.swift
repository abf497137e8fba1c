import Foundation
import Kafka
import Testing

@testable import Worker

/// Replay's hold on its cursors when every Kafka round trip is slow (a cross-region cluster, a
/// loaded broker): the mock cluster answers each request this much later.
@Suite("Replay when Kafka is slow", .timeLimit(.minutes(3)))
struct ReplaySlowKafkaTests {
    static let roundTrip = Duration.milliseconds(700)

    /// `ReplayRunTests.threeSources` with every answer of the broker `roundTrip` late, and a replayer
    /// that checkpoints at the end only (each checkpoint costs a few round trips).
    static func slowThreeSources(count: Int) async throws -> (KafkaMockCluster, DeadLetterReplayer) {
        let (cluster, replayer) = try await ReplayRunTests.threeSources(count: count)
        try cluster.setRoundTripTime(broker: 1, roundTrip)
        var slow = replayer
        slow.checkpointInterval = 10_000
        return (cluster, slow)
    }

    static func replayedValues(on cluster: KafkaMockCluster) async throws -> [String] {
        var values: [String] = []
        for topic in ["A", "B", "C"] { values += try await ReplayRunTests.values(in: topic, on: cluster) }
        return values
    }

    // Reading the cursors and storing them with the hold takes several round trips: with each
    // 0.7 s, more than the second the run waits before reading its hold back. The run used to
    // refuse ("too long to tell whether another replay run started at the same time"), on every
    // attempt: a cluster that slow could not replay at all.
    @Test("a run alone replays even when reading and storing its cursors takes longer than the settle")
    func slowRunAlone() async throws {
        let (cluster, replayer) = try await Self.slowThreeSources(count: 12)
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials]
        let report = try await replayer.run(request)
        #expect(report.count(.replayed) == 12, "\(report.table)")
        let values = try await Self.replayedValues(on: cluster)
        #expect(values.sorted() == (0..<12).map { "dl-\($0)" }.sorted(), "every dead letter once")
        // The hold was given up: the next run starts at once and finds nothing left.
        #expect(try await replayer.run(request).count(.replayed) == 0)
    }
}
