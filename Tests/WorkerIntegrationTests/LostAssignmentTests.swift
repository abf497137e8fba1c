import APNs
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// A partition lost (the group threw this member out) and given back to the same member while the
/// reader holds one of its records: the record belongs to the tenure that ended, not the new one.
@Suite("The worker across a lost assignment", .serialized, .timeLimit(.minutes(5)))
struct LostAssignmentTests {
    /// Answers at once, except for the device tokens in `held`: those wait until `releaseHeld()`.
    final class HoldingSender: NotificationSending {
        let held: Set<String>
        private let waiting = NIOLockedValueBox<[NotificationRequest]>([])
        private let pushes = NIOLockedValueBox(0)

        init(holding tokens: Set<String>) { held = tokens }

        var waitingCount: Int { waiting.withLockedValue { $0.count } }
        /// Every request sent, a repeat included.
        var pushed: Int { pushes.withLockedValue { $0 } }

        func send(_ requests: [NotificationRequest]) {
            pushes.withLockedValue { $0 += requests.count }
            for request in requests {
                if held.contains(request.push.recipientKey) {
                    waiting.withLockedValue { $0.append(request) }
                } else {
                    request.completion(Self.delivered)
                }
            }
        }

        func releaseHeld() {
            let released = waiting.withLockedValue { held in
                defer { held = [] }
                return held
            }
            for request in released {
                request.completion(Self.delivered)
            }
        }

        func shutdown() async { releaseHeld() }

        static let delivered = SendAttempt(
            response: APNsResponse(status: 200, apnsID: "00000000-0000-0000-0000-000000000000"), error: nil,
            outcome: .delivered, credential: "main", duration: .zero)
    }

    /// Stops the reader inside its `consumed` report of the `gateAt`-th record (counting from 1)
    /// until `open()`, and counts the group's hand-overs; the protocol's defaults observe the rest.
    final class GateObserver: PipelineObserver {
        let gateAt: Int
        /// Runs once the pipeline knows where its done records go, before it makes its consumer: an
        /// injected fault then meets the consumer's requests, not the start's probe.
        let onStarting: @Sendable () -> Void
        private let counts = NIOLockedValueBox<(consumed: Int, joined: Int, left: Int)>((0, 0, 0))
        private let reached = DispatchSemaphore(value: 0)
        private let gate = DispatchSemaphore(value: 0)

        init(gateAt: Int, onStarting: @escaping @Sendable () -> Void = {}) {
            self.gateAt = gateAt
            self.onStarting = onStarting
        }

        func progressStore(_ store: ProgressStore) { onStarting() }

        var joined: Int { counts.withLockedValue { $0.joined } }
        var left: Int { counts.withLockedValue { $0.left } }

        /// Waits (off the cooperative pool) until the reader stands at the gate.
        func waitAtGate(seconds: Int) async -> Bool {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread { [reached] in
                    continuation.resume(returning: reached.wait(timeout: .now() + .seconds(seconds)) == .success)
                }
            }
        }

        func open() { gate.signal() }

        func consumed(topic: String) {
            let count = counts.withLockedValue { counts in
                counts.consumed += 1
                return counts.consumed
            }
            guard count == gateAt else { return }
            reached.signal()
            // Bounded, so that a failing test cannot hang the run.
            _ = gate.wait(timeout: .now() + .seconds(60))
        }

        func consumerJoined() { counts.withLockedValue { $0.joined += 1 } }
        func consumerLeft() { counts.withLockedValue { $0.left += 1 } }
    }

    /// Events 0 to 9 on the harness's one partition, to the devices 1 to 10.
    static func produceTen(_ harness: Harness) async throws -> Int {
        try await harness.produce((0..<10).map { DeliveryUnderFailureTests.event("event-\($0)", token: $0 + 1) })
        return 10
    }

    /// A pipeline of `group` over the harness's input with `sender` and `observer`, not started.
    static func pipeline(
        _ harness: Harness, group: String, sender: HoldingSender, observer: GateObserver,
        configure: (inout PipelineConfiguration) -> Void = { _ in }
    ) throws -> WorkerPipeline {
        let configuration = try harness.stack.configuration(group: group)
        var pipelineConfiguration = PipelineConfiguration(
            inputTopics: configuration.consumer.topics, resultsTopic: configuration.topics.results,
            deadLetterTopic: configuration.topics.deadLetters)
        configure(&pipelineConfiguration)
        return WorkerPipeline(
            configuration: pipelineConfiguration, consumer: configuration.kafkaConsumerConfiguration,
            producer: configuration.kafkaProducerConfiguration, sender: sender, observer: observer,
            logger: harness.logger)
    }

    // The reader looked a record's partition up when it admitted the record, not when the consumer
    // fetched it. A record taken just before its partition was lost and admitted after the group gave
    // the partition back ran under the new tenure: the new tenure reads from the committed offset,
    // below that record, and the offset tracker ignored those lower offsets. Their events ran
    // untracked, and the commit passed them while they still waited for APNs: a crash then would
    // have left them without a result.
    @Test(
        "a record read before its partition was lost is not run under the partition's next tenure; the commit never passes an event without a result"
    )
    func recordOfALostTenureIsNotAdmitted() async throws {
        let harness = try await Harness.start(partitions: 1)
        defer { Task { await harness.shutdown() } }
        let mock = try #require(harness.stack.mockCluster)
        let events = try await Self.produceTen(harness)

        // Events 0 to 4 wait for APNs until the end; the reader stops at event 5, the first time.
        let sender = HoldingSender(holding: Set((1...5).map { Samples.deviceToken($0) }))
        let observer = GateObserver(gateAt: 6)
        let group = "lost-tenure"
        let pipeline = try Self.pipeline(harness, group: group, sender: sender, observer: observer) {
            $0.commitInterval = .milliseconds(200)
            // The loss waits (bounded) for what is at APNs; events 0 to 4 stay there until the end.
            $0.revocationTimeout = .seconds(2)
        }
        let run = Task { try await pipeline.run() }
        defer { observer.open() }

        #expect(await observer.waitAtGate(seconds: 60), "the reader reached event 5")
        // The coordinator says this member's generation is over: librdkafka drops the assignment as
        // lost, rejoins, and the group (of one) gives the partition back.
        mock.failNextRequests(.heartbeat, with: [.illegalGeneration])
        try await eventually(60, "the assignment lost and given back") {
            observer.left >= 1 && observer.joined >= 2
        }
        observer.open()

        // The new tenure reads from the start (nothing was committed): events 5 to 9 get their results,
        // events 0 to 4 wait for APNs.
        try await eventually(60, "results of events 5 to 9") {
            let offsets = try await harness.allRecords(of: EmbeddedStack.resultsTopic).map {
                try ResultRecord($0).sourceOffset
            }
            return Set(offsets).isSuperset(of: 5..<10)
        }
        try await Task.sleep(for: .seconds(1))  // five commit intervals
        let whileHeld = try await harness.commitProgress(group: group)
        #expect(
            whileHeld.allSatisfy { ($0.committed ?? 0) <= 0 },
            "committed \(whileHeld.map { $0.committed.map(String.init) ?? "nothing" }) while events 0 to 4 wait for APNs"
        )

        sender.releaseHeld()
        try await eventually(30, "the commit at the end once every event has its result") {
            try await harness.commitProgress(group: group).allSatisfy { $0.committed == $0.end }
        }
        let offsets = Set(
            try await harness.allRecords(of: EmbeddedStack.resultsTopic).map { try ResultRecord($0).sourceOffset })
        #expect(offsets == Set(0..<Int64(events)))
        pipeline.beginShutdown()
        try await run.value
    }

    // A lost assignment keeps what this member finished and could not commit, for when the group
    // gives the partitions back; but the check that the committed offset lies in what that lease
    // read refused it when nothing had been committed yet (no offset at all), and the new tenure
    // pushed every finished event again. Seen with lanes: the second lane's join made the first
    // one's first commit meet ILLEGAL_GENERATION, its partitions lost and given back.
    @Test(
        "events finished before the first commit, then the assignment lost and given back: none is pushed again"
    )
    func finishedBeforeTheFirstCommitAreNotPushedAgain() async throws {
        let harness = try await Harness.start(partitions: 1)
        defer { Task { await harness.shutdown() } }
        let mock = try #require(harness.stack.mockCluster)
        let events = try await Self.produceTen(harness)

        let sender = HoldingSender(holding: [])
        // The first commit meets a generation that is over: librdkafka drops the assignment as
        // lost, rejoins, and the group (of one) gives the partition back.
        let observer = GateObserver(gateAt: .max) { mock.failNextRequests(.offsetCommit, with: [.illegalGeneration]) }
        let group = "lost-before-commit"
        let pipeline = try Self.pipeline(harness, group: group, sender: sender, observer: observer)
        let run = Task { try await pipeline.run() }

        _ = try await harness.results(events)
        try await eventually(60, "the assignment lost and given back") {
            observer.left >= 1 && observer.joined >= 2
        }
        // The new tenure reads every record again, finds each done, and commits past them.
        try await eventually(30, "the commit at the end") {
            try await harness.commitProgress(group: group).allSatisfy { $0.committed == $0.end }
        }
        pipeline.beginShutdown()
        try await run.value

        #expect(sender.pushed == events, "each event pushed once (\(sender.pushed) pushes for \(events) events)")
        let all = try await harness.allRecords(of: EmbeddedStack.resultsTopic)
        #expect(all.count == events, "one result per event (\(all.count))")
    }

    // A lost assignment let its partitions go at once: an event at APNs at that moment finished
    // after its lease had ended, so nothing recorded it as done, and when the group gave the
    // partition back to this member the new tenure pushed it again.
    @Test("an event at APNs when the assignment is lost finishes under its lease: given back, it is not pushed again")
    func eventAtAPNsWhenLostIsNotPushedAgain() async throws {
        let harness = try await Harness.start(partitions: 1)
        defer { Task { await harness.shutdown() } }
        let mock = try #require(harness.stack.mockCluster)
        let events = try await Self.produceTen(harness)

        let sender = HoldingSender(holding: [Samples.deviceToken(4)])  // event 3
        let observer = GateObserver(gateAt: .max)
        let group = "lost-at-apns"
        let pipeline = try Self.pipeline(harness, group: group, sender: sender, observer: observer)
        let run = Task { try await pipeline.run() }
        defer { sender.releaseHeld() }

        try await eventually(60, "event 3 at APNs, the rest done") {
            guard sender.waitingCount == 1 else { return false }
            return try await harness.allRecords(of: EmbeddedStack.resultsTopic).count == events - 1
        }
        mock.failNextRequests(.heartbeat, with: [.illegalGeneration])
        try await eventually(60, "the assignment lost") { observer.left >= 1 }
        try await Task.sleep(for: .milliseconds(500))
        sender.releaseHeld()  // APNs answers after the loss
        try await eventually(60, "the partition given back, read again and committed to the end") {
            guard observer.joined >= 2 else { return false }
            return try await harness.commitProgress(group: group).allSatisfy { $0.committed == $0.end }
        }
        pipeline.beginShutdown()
        try await run.value

        #expect(sender.pushed == events, "each event pushed once (\(sender.pushed) pushes for \(events) events)")
        let all = try await harness.allRecords(of: EmbeddedStack.resultsTopic)
        #expect(all.count == events, "one result per event (\(all.count))")
    }
}
