import Foundation
import Kafka
import Testing

@testable import Worker

/// Replay's reservation of its cursors when every Kafka round trip is slow (a cross-region cluster, a
/// loaded broker): the mock cluster answers each request this much later.
@Suite("Replay when Kafka is slow", .timeLimit(.minutes(5)))
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

    // Reading the cursors and storing them with the reservation takes several round trips: with each
    // 0.7 s, more than the second the run waits before reading its reservation back. The run used to
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
        // The reservation was given up: the next run starts at once and finds nothing left.
        #expect(try await replayer.run(request).count(.replayed) == 0)
    }

    static func attempt(_ replayer: DeadLetterReplayer, _ request: ReplayRequest) async -> Result<
        ReplayReport, any Error
    > {
        do { return .success(try await replayer.run(request)) } catch { return .failure(error) }
    }

    // Both runs used to be refused here ("too long to tell"). Now one goes on and the other is
    // refused, or both are when their writes crossed: never both.
    @Test("two runs at once on a slow Kafka: never both replay, and no dead letter is replayed twice")
    func concurrentSlowRuns() async throws {
        let (cluster, replayer) = try await Self.slowThreeSources(count: 30)
        var first = replayer
        first.runID = "first-run"
        first.checkpointInterval = 10
        // Shorter than the minute a reservation lasts: a reservation that a refused run may not give up at once
        // (it took longer than the settle to store) lapses sooner, for the last run below.
        first.reservationDuration = .seconds(20)
        var second = first
        second.runID = "second-run"
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials]
        async let one = Self.attempt(first, request)
        async let two = Self.attempt(second, request)
        let refusals = ReplayRunTests.neverBoth(await [one, two])
        var replayed = try await Self.replayedValues(on: cluster)
        #expect(Set(replayed).count == replayed.count, "no dead letter replayed twice")
        // A run alone finishes what is left, once whatever reservation is left has lapsed.
        for _ in 0..<40 {
            do {
                _ = try await first.run(request)
                break
            } catch let error as DeadLetterReplayer.ReplayError where error.description.contains("holds") {
                try await Task.sleep(for: .seconds(1))
            }
        }
        replayed = try await Self.replayedValues(on: cluster)
        let partWay = refusals.contains { $0.contains("taken over") }
        #expect(Set(replayed).count == 30, "every dead letter replayed")
        #expect(replayed.count - 30 <= (partWay ? first.checkpointInterval : 0), "each dead letter once")
    }
}
