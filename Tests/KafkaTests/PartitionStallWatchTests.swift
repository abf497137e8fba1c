import Dispatch
import Logging
import TestPeers
import Testing

@testable import Kafka

/// The stall watch alone: positions and the broker's answers in, what to do out.
@Suite("Partition stall watch")
struct PartitionStallWatchTests {
    let p0 = KafkaTopicPartition(topic: "t", partition: 0)
    let p1 = KafkaTopicPartition(topic: "t", partition: 1)
    let start = ContinuousClock.now

    func at(_ seconds: Int) -> ContinuousClock.Instant { start.advanced(by: .seconds(seconds)) }

    @Test("a position unmoved for the bound is checked against the broker's end; records beyond it make a stall")
    func stall() {
        var watch = PartitionStallWatch(bound: .seconds(60))
        #expect(watch.observe(positions: [p0: 10, p1: 5], tenure: 0, now: at(0)).ask.isEmpty)
        #expect(watch.observe(positions: [p0: 10, p1: 6], tenure: 0, now: at(59)).ask.isEmpty, "not yet the bound")
        #expect(watch.observe(positions: [p0: 10, p1: 7], tenure: 0, now: at(60)).ask == [p0], "p1 moves")
        #expect(
            watch.observe(positions: [p0: 10, p1: 8], tenure: 0, now: at(61)).ask.isEmpty, "asked once until answered")
        #expect(
            watch.answered(p0, end: 25, tenure: 0, position: 10, now: at(62))
                == .stalled(position: 10, end: 25, first: true))
        #expect(watch.stalled == [p0])
        #expect(
            watch.observe(positions: [p0: 10, p1: 8], tenure: 0, now: at(100)).ask.isEmpty, "a bound after the answer")
        #expect(watch.observe(positions: [p0: 10, p1: 8], tenure: 0, now: at(122)).ask == [p0, p1])
        #expect(
            watch.answered(p0, end: 25, tenure: 0, position: 10, now: at(122))
                == .stalled(position: 10, end: 25, first: false))
        #expect(
            watch.answered(p1, end: 8, tenure: 0, position: 8, now: at(122)) == .idle,
            "p1 read everything: idle, not stalled")
        let moving = watch.observe(positions: [p0: 12, p1: 8], tenure: 0, now: at(123))
        #expect(moving.recovered == [p0])
        #expect(watch.stalled.isEmpty)
    }

    @Test("a paused or revoked partition is not watched, and a stalled one that leaves counts as recovered")
    func pausedOrRevoked() {
        var watch = PartitionStallWatch(bound: .seconds(10))
        _ = watch.observe(positions: [p0: 3], tenure: 0, now: at(0))
        _ = watch.observe(positions: [:], tenure: 0, now: at(5))  // paused
        #expect(watch.observe(positions: [p0: 3], tenure: 0, now: at(12)).ask.isEmpty, "watched afresh from its resume")
        #expect(watch.observe(positions: [p0: 3], tenure: 0, now: at(22)).ask == [p0])
        #expect(
            watch.answered(p0, end: 9, tenure: 0, position: 3, now: at(22))
                == .stalled(position: 3, end: 9, first: true))
        #expect(watch.observe(positions: [:], tenure: 0, now: at(23)).recovered == [p0])
        #expect(watch.stalled.isEmpty)
    }

    @Test("no answer from the broker, or a position that moved while asking: not a stall; asked again a bound later")
    func unanswered() {
        var watch = PartitionStallWatch(bound: .seconds(10))
        _ = watch.observe(positions: [p0: 3], tenure: 0, now: at(0))
        #expect(watch.observe(positions: [p0: 3], tenure: 0, now: at(10)).ask == [p0])
        #expect(watch.answered(p0, end: nil, tenure: 0, position: 3, now: at(11)) == .idle)
        #expect(watch.observe(positions: [p0: 3], tenure: 0, now: at(20)).ask.isEmpty)
        #expect(watch.observe(positions: [p0: 3], tenure: 0, now: at(21)).ask == [p0])
        _ = watch.observe(positions: [p0: 4], tenure: 0, now: at(22))
        #expect(
            watch.answered(p0, end: 9, tenure: 0, position: 4, now: at(23)) == .idle, "it moved: the question is void")
        #expect(watch.stalled.isEmpty)
    }
}

/// The interleaving the consumer's threads allow, in the pure watch: the look, then a revocation and
/// a new assignment, then the answer.
@Suite("Partition stall watch across assignments")
struct PartitionStallWatchTenureTests {
    let p0 = KafkaTopicPartition(topic: "t", partition: 0)
    let start = ContinuousClock.now

    func at(_ seconds: Int) -> ContinuousClock.Instant { start.advanced(by: .seconds(seconds)) }

    @Test(
        "an answer applied after the partition was revoked and assigned again is dropped: no seek to the old position")
    func answerAcrossAReassignment() {
        var watch = PartitionStallWatch(bound: .seconds(10))
        _ = watch.observe(positions: [p0: 50], tenure: 1, now: at(0))
        #expect(watch.observe(positions: [p0: 50], tenure: 1, now: at(10)).ask == [p0])
        // Revoked (tenure 2) and assigned again from its committed offset 20 (tenure 3) while the
        // broker is asked; the answer, 80, comes after.
        #expect(
            watch.answered(p0, end: 80, tenure: 3, position: 20, now: at(12)) == .idle, "a seek to 50 would skip 20-49")
        // The next look watches the new assignment afresh, from its own position.
        #expect(watch.observe(positions: [p0: 20], tenure: 3, now: at(13)).ask.isEmpty)
        #expect(watch.observe(positions: [p0: 20], tenure: 3, now: at(23)).ask == [p0])
        #expect(
            watch.answered(p0, end: 80, tenure: 3, position: 20, now: at(24))
                == .stalled(position: 20, end: 80, first: true))
    }

    @Test("an answer about a position the partition has since left (it read on, or is paused now) is dropped")
    func answerAfterTheSameAssignmentMoved() {
        var watch = PartitionStallWatch(bound: .seconds(10))
        _ = watch.observe(positions: [p0: 3], tenure: 1, now: at(0))
        #expect(watch.observe(positions: [p0: 3], tenure: 1, now: at(10)).ask == [p0])
        #expect(watch.answered(p0, end: 9, tenure: 1, position: 7, now: at(12)) == .idle, "a seek to 3 reads 3-6 again")
        #expect(watch.observe(positions: [p0: 7], tenure: 1, now: at(13)).ask.isEmpty)
        #expect(watch.observe(positions: [p0: 7], tenure: 1, now: at(23)).ask == [p0])
        #expect(watch.answered(p0, end: 9, tenure: 1, position: nil, now: at(24)) == .idle, "paused meanwhile")
    }

    @Test("a stalled partition seen in a new tenure counts as recovered, and its old question is void")
    func stalledThenReassigned() {
        var watch = PartitionStallWatch(bound: .seconds(10))
        _ = watch.observe(positions: [p0: 5], tenure: 1, now: at(0))
        _ = watch.observe(positions: [p0: 5], tenure: 1, now: at(10))
        #expect(
            watch.answered(p0, end: 9, tenure: 1, position: 5, now: at(10))
                == .stalled(position: 5, end: 9, first: true))
        #expect(watch.observe(positions: [p0: 5], tenure: 1, now: at(20)).ask == [p0])
        let seen = watch.observe(positions: [p0: 5], tenure: 3, now: at(21))
        #expect(seen.recovered == [p0] && seen.ask.isEmpty)
        #expect(watch.answered(p0, end: 9, tenure: 3, position: 5, now: at(22)) == .idle, "asked about tenure 1")
        #expect(watch.stalled.isEmpty)
    }
}

/// A stall on a real consumer: the mock cluster refuses the partition's fetches while records wait.
@Suite("A stalled partition, on the mock cluster", .timeLimit(.minutes(1)))
struct PartitionStallTests {
    @Test(
        "fetches refused while records wait: reported stalled, sought to its position, and every record read once when it recovers"
    )
    func stalledPartitionRecovers() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        let topic = uniqueName("stall")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        for index in 0..<20 {
            _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("\(index)".utf8)))
        }
        let events = TestLocked<[KafkaPartitionStall]>([])
        var configuration = consumerConfiguration(cluster, group: uniqueName("g"))
        configuration.stallBound = .seconds(1)
        configuration.properties["fetch.error.backoff.ms"] = "250"
        let consumer = try KafkaConsumer(
            configuration: configuration,
            stallHandler: { event in
                events.withLock { $0.append(event) }
            })
        try consumer.subscribe(topics: [topic])
        var values = try await read(20, from: consumer).map { String(decoding: $0.value ?? [], as: UTF8.self) }

        // The next 12 fetches refused (each followed by a metadata refresh and a 250 ms back-off:
        // several seconds), while 20 more records wait.
        cluster.failNextRequests(.fetch, with: Array(repeating: .notLeaderForPartition, count: 12))
        for index in 20..<40 {
            _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("\(index)".utf8)))
        }
        await producer.close()
        values += try await read(20, from: consumer, within: 40).map { String(decoding: $0.value ?? [], as: UTF8.self) }
        let partition = KafkaTopicPartition(topic: topic, partition: 0)
        try await withTimeout(10, "the recovery reported") {
            while !events.withLock({ $0.contains(.recovered(partition)) }) {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(values == (0..<40).map { "\($0)" }, "each record once, in order")
        let seen = events.withLock { $0 }
        // The end is the broker's at the watch's look: 40 when the 20 records were all sent within
        // the bound (1 s) of the partition's last move, fewer on a machine slow enough to take longer.
        var stall: (position: Int64, end: Int64, first: Bool)?
        if case .stalled(partition, let position, let end, let first)? = seen.first { stall = (position, end, first) }
        #expect(stall?.position == 20 && stall?.first == true, "\(seen)")
        #expect((21...40).contains(stall?.end ?? 0), "\(seen)")
        #expect(seen.last == .recovered(partition), "\(seen)")
        let more = try await readAvailable(from: consumer, for: 1)
        #expect(more.isEmpty, "nothing read twice after the seek: \(more.count)")
        await consumer.close()
    }
}

/// The broker's answer to a stall look arrives on a queue of its own, up to seconds later: an answer
/// about one assignment, or about a position left behind, must never move the partition.
@Suite("A stall answer that comes late, on the mock cluster", .timeLimit(.minutes(1)))
struct PartitionStallTenureTests {
    /// A one-partition topic with records 0 to 19 read by a consumer (assigned, no group) whose stall
    /// watch (1 s) asks the test for the broker's end: the first look waits at `asked` until the test
    /// signals `answer`, and is answered 40 (records wait beyond position 20: a stall of the position
    /// looked at).
    struct HeldLook {
        let cluster: KafkaMockCluster
        let topic: String
        let partition: KafkaTopicPartition
        let producer: KafkaProducer
        let consumer: KafkaConsumer
        /// Lets the held look be answered.
        let answer: DispatchSemaphore

        static func start(_ name: String) async throws -> HeldLook {
            let cluster = try KafkaMockCluster(brokers: 1)
            let topic = uniqueName(name)
            try cluster.createTopic(topic, partitions: 1)
            let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
            try await produce(0..<20, to: topic, with: producer)
            let (asked, answer, answered) = (
                DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), TestLocked(false)
            )
            var configuration = consumerConfiguration(cluster, group: uniqueName("g"))
            configuration.stallBound = .seconds(1)
            configuration.properties["fetch.error.backoff.ms"] = "250"
            let consumer = try KafkaConsumer(
                configuration: configuration, rebalanceHandler: nil, statisticsHandler: nil, stallHandler: nil,
                errorHandler: nil,
                partitionEnd: { _ in
                    guard !answered.withLock({ $0 }) else { return nil }
                    asked.signal()
                    answer.wait()
                    answered.withLock { $0 = true }
                    return 40
                }, logger: Logger(label: "test"))
            let partition = KafkaTopicPartition(topic: topic, partition: 0)
            try consumer.assign([KafkaTopicPartitionOffset(partition, offset: KafkaOffset.beginning)])
            #expect(try await read(20, from: consumer).last?.offset == 19)
            // Position 20, unmoved: the watch asks for the end, and the answer waits.
            try await withTimeout(20, "the stall look") { await onOwnThread { asked.wait() } }
            return HeldLook(
                cluster: cluster, topic: topic, partition: partition, producer: producer, consumer: consumer,
                answer: answer)
        }

        static func produce(_ values: Range<Int>, to topic: String, with producer: KafkaProducer) async throws {
            for index in values {
                _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("\(index)".utf8)))
            }
        }
    }

    @Test("revoked and assigned again between a look and its answer: no seek, the new assignment reads from its start")
    func answerFromAnEarlierAssignmentIsDropped() async throws {
        let look = try await HeldLook.start("tenure")
        // Meanwhile the partition is revoked and assigned again, from its start; its first fetches
        // fail for a while, so that a seek made now would land before any record is read.
        look.cluster.failNextRequests(.fetch, with: Array(repeating: .notLeaderForPartition, count: 8))
        try look.consumer.assign([KafkaTopicPartitionOffset(look.partition, offset: KafkaOffset.beginning)])
        try await HeldLook.produce(20..<40, to: look.topic, with: look.producer)
        await look.producer.close()
        look.answer.signal()
        // What arrives: all 40 with the answer dropped; 20 to 39 alone had it moved the new assignment.
        let received = TestLocked<[KafkaConsumerMessage]>([])
        _ = try? await withTimeout(30, "reading 40 records") {
            for try await record in look.consumer.messages {
                if received.withLock({
                    $0.append(record); return $0.count
                }) == 40 {
                    break
                }
            }
        }
        let again = received.withLock { $0 }
        #expect(again.first?.offset == 0, "the answer about the earlier assignment sought this one to 20")
        #expect(again.map(\.offset) == Array(0..<40), "every record of the new assignment once, in order")
        await look.consumer.close()
    }

    @Test("the partition read on while the broker was asked: no seek back, nothing read twice")
    func answerAfterThePartitionMovedIsDropped() async throws {
        let look = try await HeldLook.start("moved")
        // While the broker is asked, the partition reads on (same assignment): 20 to 39.
        try await HeldLook.produce(20..<40, to: look.topic, with: look.producer)
        await look.producer.close()
        #expect(try await read(20, from: look.consumer).map(\.offset) == Array(20..<40))
        look.answer.signal()
        let again = try await readAvailable(from: look.consumer, for: 3)
        #expect(again.map(\.offset) == [], "sought back to 20 by an answer about a position left behind")
        await look.consumer.close()
    }
}
