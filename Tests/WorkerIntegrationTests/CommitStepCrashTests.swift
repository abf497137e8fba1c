import Foundation
import Kafka
import NIOConcurrencyHelpers
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// Where the broker drops commit metadata (Tansu 0.6), a commit's done records live in the
/// progress topic: a crash at any moment of a commit must leave the next owner finding them. The
/// record was written after the commit, so a SIGKILL between the two (about 10 ms of every 50)
/// left the committed offset without its record, and everything done above it was pushed again:
/// 107 pushes in one of five runs of the burst kill at 40,000 events.
@Suite("A crash at any step of a commit", .serialized, .timeLimit(.minutes(3)))
struct CommitStepCrashTests {
    static let group = "commit-steps"
    static let partition = KafkaTopicPartition(topic: EmbeddedStack.inputTopic, partition: 0)

    /// What a partition's next owner reads from the progress topic (as `ProgressTopic` does): reading
    /// back from the newest record of the partition's key, records written for an offset below the
    /// committed one are passed over; the first other decides (written for the committed offset:
    /// its done records; for a higher one: nothing).
    static func knownDone(_ records: [KafkaConsumerMessage], committed: Int64) -> OffsetRanges {
        let key = Array("\(group)\n\(partition.topic)\n\(partition.partition)".utf8)
        for record in records.sorted(by: { $0.offset > $1.offset }) where record.key == key {
            let text = String(decoding: record.value ?? [], as: UTF8.self)
            guard let written = CommitMetadata.writtenFor(text) else { return OffsetRanges() }
            if written < committed { continue }
            guard written == committed, let metadata = try? CommitMetadata.decode(text, committed: written) else {
                return OffsetRanges()
            }
            return metadata.done
        }
        return OffsetRanges()
    }

    // 200 alerts in one partition: the event at offset 0 gets eight 503s and then goes through (the
    // committed offset then moves to 100), the one at 100 gets 503 for the whole test, the rest go
    // through at once: every commit has done records above its offset.
    @Test(
        "on a broker that drops commit metadata, a crash before or after the offset is committed loses no done record")
    func everyStepKeepsTheDoneRecords() async throws {
        let harness = try await Harness.start(broker: .tansu, partitions: 1)
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        let tokens = (0..<200).map { Samples.deviceToken($0 == 0 ? 0xdead : $0 == 100 ? 0xbeef : $0) }
        for token in tokens { simulator.devices.register(token) }
        simulator.faults.script(deviceToken: tokens[0], Array(repeating: .serviceUnavailable, count: 8))
        simulator.faults.script(deviceToken: tokens[100], Array(repeating: .serviceUnavailable, count: 1_000))
        try await harness.produce(
            tokens.map { Samples.alert(id: UUID().uuidString.lowercased(), deviceToken: $0, partition: 0) })

        let worker = try harness.startWorker(group: Self.group, maxInFlight: 300) { configuration in
            configuration.delivery.retry.maxAttempts = 1_000
            configuration.delivery.retry.initialBackoff = .milliseconds(100)
            configuration.delivery.retry.maxBackoff = .milliseconds(200)
        }
        let checker = StepChecker(harness: harness)
        worker.assembly.pipeline.onCommitStepForTesting { await checker.check($0) }
        try await eventually(90, "a commit moving the offset past the first event, checked") {
            checker.seen.withLockedValue { $0.moving >= 1 || $0.checks >= 20 }
        }
        try await Task.sleep(for: .seconds(3))  // that commit's other step
        worker.assembly.pipeline.onCommitStepForTesting(nil)
        try await worker.stop()
        let result = checker.seen.withLockedValue { $0 }
        #expect(result.moving > 0, "no commit past the first event was checked (\(result.checks) checks)")
        #expect(result.missing.isEmpty, "\(result.missing.joined(separator: "; "))")
    }

    /// At each step of a commit with done records, a crash now: what would the next owner know?
    final class StepChecker: Sendable {
        struct Seen {
            var checks = 0
            /// Checks of a commit past the first event (offset 0, which waited for its retries).
            var moving = 0
            var missing: [String] = []
        }

        let harness: Harness
        let seen = NIOLockedValueBox(Seen())

        init(harness: Harness) { self.harness = harness }

        func check(_ step: WorkerPipeline.CommitStep) async {
            let name: String
            let candidates: [CommitCandidate]
            switch step {
            case .progressKept(let kept):
                name = "progress kept"
                candidates = kept
            case .committed(let committed):
                name = "offset committed"
                candidates = committed
            }
            guard let candidate = candidates.first(where: { $0.partition == CommitStepCrashTests.partition }),
                !candidate.done.isEmpty, seen.withLockedValue({ $0.moving < 2 && $0.checks < 20 })
            else { return }
            guard let stored = try? await harness.committedProgress(group: CommitStepCrashTests.group)?.offset,
                let records = try? await harness.allRecords(of: EmbeddedStack.progressTopic)
            else { return }
            // Everything from the committed offset up to the candidate's, and its done records.
            let known = CommitStepCrashTests.knownDone(records, committed: stored)
            var owed = Set(candidate.done.ranges.flatMap { Array($0) })
            if stored < candidate.offset { owed.formUnion(stored..<candidate.offset) }
            let missing = owed.filter { $0 >= stored && !known.contains($0) }
            seen.withLockedValue { seen in
                seen.checks += 1
                if candidate.offset > 0 { seen.moving += 1 }  // past the first event: the offset moved
                if !missing.isEmpty {
                    seen.missing.append(
                        "\(name) (committing \(candidate.offset), the broker has \(stored)): "
                            + "\(missing.count) done records unknown to the next owner")
                }
            }
        }
    }
}
