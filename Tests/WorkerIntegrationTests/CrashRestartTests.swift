import APNsSimulator
import Foundation
import Kafka
import TestPeers
import Testing
import Worker
import WorkerDemo

/// The real binary, `apns-worker run --config FILE`, killed and restarted.
@Suite("The worker binary killed mid-run", .serialized, .timeLimit(.minutes(5)))
struct CrashRestartTests {
    static let binary: URL = {
        var directory = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("apns-worker")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/apns-worker")
    }()

    /// posix_spawn, not Foundation's Process, whose run() crashes now and then on Linux.
    func start(config: String) throws -> BackgroundProgram {
        try spawnInBackground(Self.binary.path, ["run", "--config", config])
    }

    @Test(
        "SIGKILL mid-run, then a restart: every event gets a result; only uncommitted ones twice",
        arguments: Broker.allCases)
    func killAndRestart(_ broker: Broker) async throws {
        let harness = try await Harness.start(broker: broker)
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        let batch = SampleBatch.mixed(count: 3_000, topic: EmbeddedStack.inputTopic, simulator: simulator, seed: 11)
        // At most 50 events at APNs for 50 ms each: about 1,000 a second, so the kill lands mid-run
        // whatever the client's speed (with 300 at 5 ms, librdkafka 2.8 fed the worker fast enough
        // to finish all 3,000 between the check and the kill).
        simulator.faults.latency = .fixed(.milliseconds(50))
        try await harness.produce(batch.records)
        let config = harness.stack.directory + "/worker.yaml"
        try harness.stack.configurationText(group: "crash", maxInFlight: 50)
            .write(toFile: config, atomically: true, encoding: .utf8)

        let first = try start(config: config)
        // Watched at APNs (the simulator counts in memory), not by reading the results topic, which
        // takes long enough for the worker to finish everything first.
        try await eventually(60, "the first 500 pushes accepted") { simulator.observation.count(status: 200) >= 500 }
        kill(first.processIdentifier, SIGKILL)
        #expect(first.waitUntilExit() == 128 + SIGKILL)
        // What the group had committed when the worker died: everything below it is done for good.
        let committedAtKill = try await harness.commitProgress(group: "crash").map { $0.committed ?? 0 }
        let beforeRestart = try await harness.allRecords(of: EmbeddedStack.resultsTopic).map(ResultRecord.init)
        #expect(beforeRestart.count < 3_000, "killed mid-run")

        let second = try start(config: config)
        let results = try await harness.results(3_000, timeout: .seconds(180))
        try await eventually(15, "offsets committed to the end") {
            try await harness.commitProgress(group: "crash").allSatisfy { $0.committed == $0.end }
        }
        kill(second.processIdentifier, SIGTERM)
        #expect(second.waitUntilExit() == 0, "SIGTERM drains, commits and exits 0")

        #expect(Set(results.map(\.sourceKey)).count == 3_000, "no event without a result")
        let counts = results.reduce(into: [ResultOutcome: Int]()) { $0[$1.outcome, default: 0] += 1 }
        #expect(counts == batch.expectedCounts)
        // Duplicates only for events at or past their partition's committed offset at the kill:
        // the ones that were in flight (or done but not yet committed).
        let all = try await harness.allRecords(of: EmbeddedStack.resultsTopic).map(ResultRecord.init)
        let bySource = Dictionary(grouping: all, by: \.sourceKey)
        let duplicated = bySource.values.filter { $0.count > 1 }.map { $0[0] }
        for result in duplicated {
            #expect(
                result.sourceOffset >= committedAtKill[result.sourcePartition],
                "\(result.sourceKey) was committed, yet repeated")
        }
        #expect(duplicated.count < 3_000 - 500)
    }
}
