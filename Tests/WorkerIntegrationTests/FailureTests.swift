import APNsSimulator
import Foundation
import ReliabilityMatrix
import Kafka
import TestPeers
import Testing
import Worker
import WorkerDemo

@Suite("The worker under failures", .serialized, .timeLimit(.minutes(5)))
struct FailureTests {
    @Test("APNs answering only 503: the worker backs off, holds its input at the bound, recovers, loses nothing")
    func serviceUnavailableStorm() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        let batch = SampleBatch.mixed(count: 2_000, topic: EmbeddedStack.inputTopic, simulator: simulator, seed: 3)
        simulator.faults.setRate(.serviceUnavailable, 1.0)
        try await harness.produce(batch.records)

        let worker = try harness.startWorker(group: "storm", maxInFlight: 200) { configuration in
            configuration.delivery.retry.maxAttempts = 30
            configuration.delivery.retry.maxBackoff = .seconds(4)
            configuration.delivery.retry.maxRetryDuration = .seconds(120)
        }
        // Backoff: 200 events in flight against a server answering every request in microseconds
        // would make thousands of requests a second without it; with it, a few seconds into the storm,
        // each event waits up to seconds between attempts.
        try await eventually(30, "the first 503") { simulator.observation.count(status: 503) > 0 }
        try await Task.sleep(for: .seconds(4))
        let before = simulator.observation.count(status: 503)
        try await Task.sleep(for: .seconds(3))
        let lateRate = Double(simulator.observation.count(status: 503) - before) / 3
        #expect(lateRate < 1_000, "\(lateRate) requests/s 4 s into the storm")
        // At the bound input is held; the hold ends only when half the events are done.
        #expect(worker.assembly.pipeline.inFlight >= 100)
        #expect(worker.assembly.registry.emitToString().contains("apns_worker_consumer_paused 1"))
        #expect(worker.assembly.health.readiness.isReady, "APNs being unavailable is not a reason to page")

        simulator.faults.setRate(.serviceUnavailable, 0)
        let results = try await harness.results(2_000, timeout: .seconds(180))
        try await worker.stop()
        let counts = results.reduce(into: [ResultOutcome: Int]()) { $0[$1.outcome, default: 0] += 1 }
        #expect(counts == batch.expectedCounts, "the storm cost no event its outcome")
        #expect(results.filter { $0.outcome == .delivered }.allSatisfy { $0.attempts >= 2 } == false)
        #expect(results.contains { $0.outcome == .delivered && $0.attempts > 3 })
    }

    // On Tansu too: its ListOffsets answer lags the log (it names the start of the last record
    // batch), and the replay took that answer as the end of the dead-letter topic, leaving the last
    // batch's dead letters but one behind.
    @Test(
        "dead letters from broken credentials end delivered once the key is fixed and they are replayed",
        arguments: Broker.allCases)
    func replayAfterCredentialFix(_ broker: Broker) async throws {
        let harness = try await Harness.start(broker: broker)
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.devices.policy = .accept
        let events = (0..<100).map { Samples.alert(id: "cred-\($0)", deviceToken: Samples.deviceToken($0 + 1)) }
        try await harness.produce(events)

        // A key APNs does not know: every request is refused with 403 InvalidProviderToken.
        let unknownKey = try Samples.unknownKeyFile(in: harness.stack.directory)
        let broken = try harness.startWorker(group: "credentials") { Samples.use(key: unknownKey, in: &$0) }
        let failed = try await harness.results(100)
        #expect(failed.allSatisfy { $0.outcome == .failed && $0.status == 403 && $0.reason == "InvalidProviderToken" })
        #expect(!broken.assembly.health.readiness.isReady, "readiness goes red")
        #expect(broken.assembly.health.readiness.credentials.contains("demo: InvalidProviderToken"))
        let deadLetters = try await harness.deadLetters(100)
        #expect(deadLetters.allSatisfy { $0.headers.lastString(DeadLetterHeader.reason) == "credentials" })
        try await broken.stop()

        // The fix: the right key. Then the dead letters go back to the input topic.
        let fixed = try harness.startWorker(group: "credentials")
        let report = try await DeadLetterReplayer(
            consumerConfiguration: KafkaConsumerConfiguration(
                bootstrapServers: harness.stack.cluster.bootstrapServers, groupID: "replay"),
            producerConfiguration: KafkaProducerConfiguration(bootstrapServers: harness.stack.cluster.bootstrapServers),
            logger: harness.logger
        ).run(
            {
                var request = ReplayRequest(deadLetterTopic: EmbeddedStack.deadLetterTopic)
                request.reasons = [.credentials]
                return request
            }())
        #expect(report.count(.replayed) == 100)

        try await eventually(60, "every replayed event delivered") {
            let all = try await harness.allRecords(of: EmbeddedStack.resultsTopic).map(ResultRecord.init)
            return Set(all.filter { $0.outcome == .delivered }.compactMap(\.eventID)).count == 100
        }
        #expect(fixed.assembly.health.readiness.isReady)
        try await fixed.stop()
        let all = try await harness.allRecords(of: EmbeddedStack.resultsTopic).map(ResultRecord.init)
        for index in 0..<100 {
            let outcomes = all.filter { $0.eventID == "cred-\(index)" }.map(\.outcome)
            #expect(outcomes.first == .failed && outcomes.last == .delivered)
        }
        // The replayed records carry the replay counter.
        let inputs = try await harness.allRecords(of: EmbeddedStack.inputTopic)
        #expect(inputs.count == 200)
        #expect(inputs.filter { $0.headers.lastString(DeadLetterHeader.replayCount) == "1" }.count == 100)
    }
}
