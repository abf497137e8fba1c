import APNsSimulator
import Foundation
import Kafka
import ReliabilityMatrix
import TestPeers
import Testing
import Worker
import WorkerDemo

/// A notification reaches its user once: a crash re-sends only what APNs had not answered, and a
/// hand-over re-sends nothing, even while one event of the partition waits for a retry (which pins
/// the committed offset below everything finished after it).
@Suite("Push once: crashes and hand-overs with an event waiting for a retry", .serialized, .timeLimit(.minutes(5)))
struct PushOnceTests {
    /// 200 alerts in partition 0 of two: the first to a device APNs answers 503 for a long while (it
    /// waits for retries, far longer than the test), the others to devices APNs accepts at once.

    struct Setup {
        let harness: Harness
        let config: String
        let ids: [String]
        let stuckToken = Samples.deviceToken(0xdead)

        static func start(_ broker: Broker, _ groupProtocol: KafkaGroupProtocol = .classic) async throws -> Setup {
            let harness = try await Harness.start(broker: broker, partitions: 2, groupProtocol: groupProtocol)
            let simulator = harness.stack.simulator
            simulator.faults.script(
                deviceToken: Samples.deviceToken(0xdead), Array(repeating: .serviceUnavailable, count: 500))
            for index in 0..<200 {
                simulator.devices.register(index == 0 ? Samples.deviceToken(0xdead) : Samples.deviceToken(index))
            }
            let ids = (0..<200).map { _ in UUID().uuidString.lowercased() }
            try await harness.produce(
                ids.enumerated().map { index, id in
                    Samples.alert(
                        id: id, deviceToken: index == 0 ? Samples.deviceToken(0xdead) : Samples.deviceToken(index),
                        partition: 0)
                })
            // Retries far apart and for long: the first event is still waiting when the test acts.
            let text = harness.stack.configurationText(group: "push-once", maxInFlight: 300)
                .replacingOccurrences(
                    of: "retry: { maxAttempts: 6, initialBackoff: 50ms, maxBackoff: 1s, maxRetryDuration: 1m }",
                    with: "retry: { maxAttempts: 1000, initialBackoff: 2s, maxBackoff: 5s, maxRetryDuration: 10m }")
            let config = harness.stack.directory + "/push-once.yaml"
            try text.write(toFile: config, atomically: true, encoding: .utf8)
            return Setup(harness: harness, config: config, ids: ids)
        }

        func start() throws -> BackgroundProgram {
            try spawnInBackground(CrashRestartTests.binary.path, ["run", "--config", config])
        }

        /// How many times APNs (the simulator) accepted each event's push.
        var acceptedPushes: [String: Int] {
            harness.stack.simulator.observation.records.reduce(into: [:]) {
                $0[$1.apnsID.lowercased(), default: 0] += 1
            }
        }

        /// Events whose push APNs accepted more than once: notifications a user got twice.
        var pushedTwice: [String] { acceptedPushes.filter { $0.value > 1 }.map(\.key) }

        /// Waits until the group's commit records the 199 finished events (offset 0, where the first one
        /// waits; 1 to 199 done above it), as it should within the commit interval (50 ms).
        /// On Tansu, which drops commit metadata, the done records are in the progress topic.
        func committed() async throws {
            try await eventually(10, "the commit of the finished events") {
                guard let (offset, done) = try await harness.committedProgress(group: "push-once") else { return false }
                if harness.broker == .tansu {
                    guard let last = try await harness.allRecords(of: EmbeddedStack.progressTopic).last?.value,
                        let progress = try? CommitMetadata.decode(String(decoding: last, as: UTF8.self), committed: 0)
                    else { return false }
                    return offset == 0 && progress.done.count == 199
                }
                return offset == 0 && done.count == 199
            }
        }

        /// A worker that has finished every event but the first, which waits for a retry, and has
        /// committed what it may.
        func startWithTheFirstEventRetrying() async throws -> BackgroundProgram {
            let first = try start()
            try await eventually(60, "199 results, the first event still retrying") {
                try await results().count >= 199
            }
            try await committed()
            return first
        }

        func results() async throws -> [ResultRecord] {
            try await harness.allRecords(of: EmbeddedStack.resultsTopic).map(ResultRecord.init)
        }

        /// What a user and downstream see at the end: every event pushed once, one result each.
        func expectEachPushedOnce() async throws {
            #expect(pushedTwice.isEmpty, "\(pushedTwice.count) notifications pushed twice")
            #expect(acceptedPushes.count == 200)
            let results = try await results()
            #expect(results.count == 200, "one result each, none repeated: \(results.count)")
            #expect(Set(results.compactMap(\.eventID)) == Set(ids))
        }
    }

    // The committed offset was the contiguous done prefix: one event waiting for a retry pinned it,
    // and a crash re-pushed every event finished after it.
    /// Each broker under the classic group protocol, and the mock cluster under the next-generation
    /// one (Tansu does not speak it).
    static let groups: [(Broker, KafkaGroupProtocol)] = [(.mock, .classic), (.tansu, .classic), (.mock, .consumer)]

    @Test(
        "SIGKILL while one event waits for a retry: after a restart, only that event is pushed",
        arguments: groups)
    func killWithAPinnedPartition(_ broker: Broker, _ groupProtocol: KafkaGroupProtocol) async throws {
        let setup = try await Setup.start(broker, groupProtocol)
        defer { Task { await setup.harness.shutdown() } }
        let first = try await setup.startWithTheFirstEventRetrying()
        kill(first.processIdentifier, SIGKILL)
        _ = first.waitUntilExit()
        #expect(setup.acceptedPushes.count == 199)

        setup.harness.stack.simulator.faults.clear()  // APNs takes the first event's device now
        let second = try setup.start()
        try await eventually(60, "the first event's result") { try await setup.results().count >= 200 }
        try await Task.sleep(for: .seconds(1))
        kill(second.processIdentifier, SIGTERM)
        _ = second.waitUntilExit()
        try await setup.expectEachPushedOnce()
    }

    // A hand-over waited for the retrying event up to the drain bound, pushing it meanwhile, then
    // committed the prefix: the next owner pushed everything after it again.
    @Test(
        "SIGTERM hands the partition over while one event waits for a retry: nothing is pushed twice",
        arguments: groups)
    func handOverWithAPinnedPartition(_ broker: Broker, _ groupProtocol: KafkaGroupProtocol) async throws {
        let setup = try await Setup.start(broker, groupProtocol)
        defer { Task { await setup.harness.shutdown() } }
        let first = try await setup.startWithTheFirstEventRetrying()
        let second = try setup.start()  // joins the group: partition 0 stays with the first, or is handed over now
        // Time for the join to settle: Tansu 0.6 holds a join for half the session (3 s here), and a
        // member leaving during a rebalance left the other without an assignment for good.
        try await Task.sleep(for: .seconds(8))
        setup.harness.stack.simulator.faults.clear()
        kill(first.processIdentifier, SIGTERM)
        #expect(first.waitUntilExit() == 0)

        try await eventually(60, "the first event's result from the new owner") {
            try await setup.results().count >= 200
        }
        try await Task.sleep(for: .seconds(1))
        kill(second.processIdentifier, SIGTERM)
        _ = second.waitUntilExit()
        try await setup.expectEachPushedOnce()
    }

    @Test(
        "commit metadata that cannot be trusted is ignored: every record from the committed offset is run",
        arguments: [
            ("a checksum that does not match", "apns-worker/1 c=5 d=AQ0 s=00000000"),
            ("written for another offset", CommitMetadata(committed: 3, done: OffsetRanges([4..<20])).encoded().text),
            ("another program's", #"{"owner":"someone-else","done":[6,7,8]}"#),
            ("cut short", "apns-worker/1 c=5 d=AQ"),
        ])
    func untrustedMetadata(_ what: String, _ metadata: String) async throws {
        let harness = try await Harness.start(broker: .mock, partitions: 1)
        defer { Task { await harness.shutdown() } }
        let ids = (0..<20).map { _ in UUID().uuidString.lowercased() }
        for index in 0..<20 { harness.stack.simulator.devices.register(Samples.deviceToken(index)) }
        try await harness.produce(ids.enumerated().map { Samples.alert(id: $1, deviceToken: Samples.deviceToken($0)) })
        // Offset 5 committed, with metadata saying records above it are done (were it trusted).
        try await harness.commit(group: "untrusted", offset: 5, metadata: metadata)
        let worker = try harness.startWorker(group: "untrusted")
        let results = try await harness.results(15)
        try await worker.stop()
        #expect(Set(results.map(\.sourceOffset)) == Set(5..<20), "\(what): every record from 5 on has a result")
    }

    @Test("trusted commit metadata: the records it names done are not run again, the others are")
    func trustedMetadata() async throws {
        let harness = try await Harness.start(broker: .mock, partitions: 1)
        defer { Task { await harness.shutdown() } }
        let ids = (0..<20).map { _ in UUID().uuidString.lowercased() }
        for index in 0..<20 { harness.stack.simulator.devices.register(Samples.deviceToken(index)) }
        try await harness.produce(ids.enumerated().map { Samples.alert(id: $1, deviceToken: Samples.deviceToken($0)) })
        // 5 committed; 6 to 9 and 12 done above it.
        let metadata = CommitMetadata(committed: 5, done: OffsetRanges([6..<10, 12..<13])).encoded().text
        try await harness.commit(group: "trusted", offset: 5, metadata: metadata)
        let worker = try harness.startWorker(group: "trusted")
        _ = try await harness.results(10)
        try await eventually(30, "offsets committed to the end") {
            try await harness.commitProgress(group: "trusted").allSatisfy { $0.committed == $0.end }
        }
        try await worker.stop()
        let offsets = try await harness.allRecords(of: EmbeddedStack.resultsTopic).map {
            try ResultRecord($0).sourceOffset
        }
        #expect(offsets.sorted() == [5, 10, 11] + Array(13..<20), "only what was not done ran")
        #expect(harness.stack.simulator.observation.records.count == 10)
    }
}
