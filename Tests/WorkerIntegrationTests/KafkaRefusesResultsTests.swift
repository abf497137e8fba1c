import APNsSimulator
import Foundation
import Kafka
import ReliabilityMatrix
import TestPeers
import Testing
import Worker
import WorkerDemo

/// Kafka that keeps not taking results is no reason to restart: a restart could not publish either,
/// and it would push every uncommitted event again.
@Suite("Kafka not accepting results", .timeLimit(.minutes(4)))
struct KafkaRefusesResultsTests {
    // librdkafka retries NOT_ENOUGH_REPLICAS (or a leaderless partition) inside itself, with no
    // delivery report for up to message.timeout.ms: liveness wanted a step while events were in
    // flight, turned red after 60 s, and Kubernetes restarted a worker that was only waiting.
    @Test(
        "results refused with NOT_ENOUGH_REPLICAS past the liveness window: live stays green, ready turns red saying why, nothing is pushed twice"
    )
    func notEnoughReplicas() async throws {
        let harness = try await Harness.start(broker: .mock, partitions: 1)
        defer { Task { await harness.shutdown() } }
        let mock = try #require(harness.stack.mockCluster)
        let simulator = harness.stack.simulator
        let ids = (0..<40).map { _ in UUID().uuidString.lowercased() }
        for index in 0..<40 { simulator.devices.register(Samples.deviceToken(index)) }
        try await harness.produce(ids.enumerated().map { Samples.alert(id: $1, deviceToken: Samples.deviceToken($0)) })
        mock.failNextRequests(.produce, with: Array(repeating: .notEnoughReplicas, count: 100_000))

        let worker = try harness.startWorker(group: "kafka-refuses")
        let health = worker.assembly.health
        #expect(health.livenessWindow <= .seconds(60))
        try await eventually(30, "every push answered") { simulator.observation.records.count == 40 }
        var waitingSaid: String?
        var deadAt: Int?
        for second in 0..<75 {  // past the liveness window
            try await Task.sleep(for: .seconds(1))
            if !health.isLive, deadAt == nil { deadAt = second }
            let kafka = health.readiness.kafka
            if kafka.hasPrefix("waiting for Kafka to accept results") { waitingSaid = kafka }
        }
        #expect(deadAt == nil, "liveness turned red after \(deadAt ?? 0) s of Kafka not taking results")
        #expect(waitingSaid != nil, "readiness says why: \(health.readiness.kafka)")
        #expect(try await harness.allRecords(of: EmbeddedStack.resultsTopic).isEmpty, "Kafka took nothing")

        mock.clearRequestErrors(.produce)
        let results = try await harness.results(40)
        try await eventually(30, "readiness green again") { health.readiness.kafka == "ok" }
        try await worker.stop()
        #expect(Set(results.compactMap(\.eventID)) == Set(ids))
        let accepted = simulator.observation.records.reduce(into: [String: Int]()) { $0[$1.apnsID, default: 0] += 1 }
        #expect(accepted.count == 40 && accepted.values.allSatisfy { $0 == 1 }, "each pushed once")
    }
}
