import APNsSimulator
import Foundation
import Kafka
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// The in-flight bound against APNs round trips: where input waits, and what it costs.
@Suite("The worker at its in-flight bound", .serialized, .timeLimit(.minutes(5)))
struct BackpressureTests {
    // Pausing librdkafka's partitions at every hold threw away what it had prefetched, and after the
    // resume its broker thread started fetching again only at its next wake-up, up to a second
    // later: at a 100 ms APNs round trip the worker kept about 30 % of its throughput.
    @Test("a hold at the in-flight bound stops the reader, not the fetcher; every held event ends delivered")
    func holdAtTheBoundKeepsFetching() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.devices.policy = .accept
        simulator.faults.latency = .fixed(.seconds(5))
        try await harness.produce((0..<100).map { Self.event("held-\($0)", token: $0 + 1) })

        let worker = try harness.startWorker(group: "held", maxInFlight: 20)
        let pipeline = worker.assembly.pipeline
        try await eventually(30, "the input held at the bound", state: { "\(pipeline.inFlight) in flight" }) {
            pipeline.inFlight == 20 && worker.assembly.registry.emitToString().contains("apns_worker_consumer_paused 1")
        }
        let consumer = try #require(pipeline.consumerForTesting)
        #expect(consumer.assignment.count == 4)
        #expect(consumer.pausedPartitions.isEmpty, "librdkafka keeps fetching into the consumer's buffer")
        #expect(consumer.bufferedCount > 0, "the next records wait in the buffer")

        simulator.faults.latency = .none
        let results = try await harness.results(100)
        try await worker.stop()
        #expect(results.count == 100 && results.allSatisfy { $0.outcome == .delivered })
    }

    @Test(
        "a hold that outlasts the consumer's grace with its buffer full pauses the fetch; input resumes, nothing lost")
    func longHoldPausesTheFetch() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.devices.policy = .accept
        simulator.faults.latency = .fixed(.seconds(5))
        try await harness.produce((0..<200).map { Self.event("long-\($0)", token: $0 + 1) })

        let worker = try harness.startWorker(group: "long-hold", maxInFlight: 20) { $0.consumer.bufferCapacity = 30 }
        let pipeline = worker.assembly.pipeline
        try await eventually(30, "the fetch paused", state: { "\(pipeline.inFlight) in flight" }) {
            guard let consumer = pipeline.consumerForTesting, consumer.assignment.count == 4 else { return false }
            return consumer.pausedPartitions == consumer.assignment
        }

        simulator.faults.latency = .none
        let results = try await harness.results(200)
        try await worker.stop()
        #expect(results.count == 200 && results.allSatisfy { $0.outcome == .delivered })
    }

    static func event(_ id: String, token: Int) -> KafkaProducerMessage {
        Samples.alert(id: id, deviceToken: Samples.deviceToken(token), topic: EmbeddedStack.bundleID, partition: nil)
    }
}
