import Foundation
import Kafka
import Logging
import TestPeers
import Testing

/// The next-generation consumer group protocol (KIP-848, `group.protocol=consumer`) beside the
/// classic one, on librdkafka's mock cluster (Tansu does not speak it).
@Suite("The next-generation consumer group protocol", .timeLimit(.minutes(3)))
struct GroupProtocolTests {
    @Test("under the consumer protocol the typed session timeout and assignment strategy are left to the broker")
    func brokerOwnedLeftOut() throws {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: "localhost:9092", groupID: "g")
        let classic = Dictionary(configuration.librdkafkaProperties, uniquingKeysWith: { $1 })
        #expect(classic["session.timeout.ms"] == "45000")
        #expect(classic["partition.assignment.strategy"] == "cooperative-sticky")
        #expect(classic["group.protocol"] == nil, "librdkafka's default, not named")

        configuration.groupProtocol = .consumer
        configuration.properties["group.protocol"] = "classic"  // the typed field is its one source
        let properties = configuration.librdkafkaProperties
        let consumer = Dictionary(properties, uniquingKeysWith: { $1 })
        #expect(consumer["session.timeout.ms"] == nil)
        #expect(consumer["partition.assignment.strategy"] == nil)
        #expect(properties.last { $0.0 == "group.protocol" }?.1 == "consumer")
        #expect(properties.filter { $0.0 == "group.protocol" }.count == 1)
        #expect(configuration.effective.sessionTimeout == KafkaGroupProtocol.brokerDefaultSessionTimeout)
        try configuration.validate()
    }

    /// The list the worker's configuration check refuses is librdkafka's own: each property in it makes
    /// the consumer fail to start under the consumer protocol, and validate() says so first.
    @Test(
        "each property the consumer protocol leaves to the broker is refused by librdkafka, and by validate first",
        arguments: KafkaGroupProtocol.consumer.brokerOwned.map(\.property))
    func brokerOwnedRefused(_ property: String) throws {
        let value =
            property == "partition.assignment.strategy"
            ? "range" : property == "group.protocol.type" ? "consumer" : "10000"
        var configuration = KafkaConsumerConfiguration(bootstrapServers: "127.0.0.1:1", groupID: uniqueName("g"))
        configuration.groupProtocol = .consumer
        configuration.properties[property] = value
        let validation = #expect(throws: KafkaError.self) { try configuration.validate() }
        #expect(validation?.property == property)
        #expect(
            validation?.message.contains("leaves \(property) to the broker") == true,
            "\(String(describing: validation))")
        let made = #expect(throws: KafkaError.self) { _ = try KafkaConsumer(configuration: configuration) }
        #expect(made?.message.contains(property) == true, "librdkafka's own refusal: \(String(describing: made))")

        configuration.groupProtocol = .classic
        if property != "group.protocol.type" {  // not a property the classic protocol has either
            let consumer = try KafkaConsumer(configuration: configuration)
            Task { await consumer.close() }
        }
    }

    @Test(
        "the protocol probe says supported where the coordinator answers ConsumerGroupHeartbeat, unsupported where it lacks it"
    )
    func probe() async throws {
        for withdrawn in [false, true] {
            let (cluster, topic) = try Self.cluster(withdrawn: withdrawn)
            let started = ContinuousClock.now
            let verdict = try await KafkaGroupProtocolProbe.probe(
                consumerConfiguration(cluster, group: uniqueName("g")), topic: topic, timeout: .seconds(30),
                verdictAfter: .seconds(3), logger: Logger(label: "probe"))
            #expect(verdict == (withdrawn ? .unsupported : .supported), "withdrawn: \(withdrawn)")
            #expect(ContinuousClock.now - started < .seconds(20), "a verdict well before the time allowed")
        }
    }

    @Test("a member on a broker without the protocol says so through its error handler (librdkafka raises nothing)")
    func memberSaysUnsupported() async throws {
        for withdrawn in [true, false] {
            let (cluster, topic) = try Self.cluster(withdrawn: withdrawn)
            var configuration = KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: uniqueName("g"))
            configuration.groupProtocol = .consumer
            let errors = TestLocked<[KafkaError]>([])
            let consumer = try KafkaConsumer(
                configuration: configuration, errorHandler: { error in errors.withLock { $0.append(error) } })
            try consumer.subscribe(topics: [topic])
            let deadline = ContinuousClock.now + .seconds(withdrawn ? 60 : 15)
            while ContinuousClock.now < deadline,
                !errors.withLock({ $0.contains { $0.code == .unsupportedFeature } }),
                withdrawn || consumer.assignment.count < 2
            {
                try await Task.sleep(for: .milliseconds(100))
            }
            let said = errors.withLock { $0.filter { $0.code == .unsupportedFeature } }
            if withdrawn {
                #expect(said.count == 1, "\(errors.withLock { $0 })")
                #expect(said.first?.message.contains("does not speak the next-generation group protocol") == true)
                #expect(consumer.assignment.isEmpty)
            } else {
                #expect(said.isEmpty, "\(said)")
                #expect(consumer.assignment.count == 2)
            }
            await consumer.close()
        }
    }

    /// A mock cluster with a topic of two partitions; `withdrawn`: answering ApiVersions as a broker
    /// without ConsumerGroupHeartbeat (before Apache Kafka 4.0).
    static func cluster(withdrawn: Bool) throws -> (KafkaMockCluster, topic: String) {
        let cluster = try KafkaMockCluster(brokers: 1)
        if withdrawn { try cluster.withdraw(.consumerGroupHeartbeat) }
        let topic = uniqueName("protocol")
        try cluster.createTopic(topic, partitions: 2)
        return (cluster, topic)
    }

    @Test("the probe cannot decide when no broker answers, and says why")
    func probeUnanswered() async throws {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: "127.0.0.1:1", groupID: uniqueName("g"))
        configuration.properties["reconnect.backoff.max.ms"] = "100"
        let verdict = try await KafkaGroupProtocolProbe.probe(
            configuration, topic: "t", timeout: .seconds(2), logger: Logger(label: "probe"))
        guard case .undecided(let why) = verdict else {
            Issue.record("expected undecided, got \(verdict)")
            return
        }
        #expect(why.contains("no group coordinator"))
    }

    @Test("two members split the partitions one at a time; when one leaves, the other takes over and nothing is lost")
    func shareThenTakeOver() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        cluster.setConsumerGroupTimings(session: .seconds(6), heartbeat: .milliseconds(500))
        let topic = uniqueName("shared")
        let group = uniqueName("group")
        try cluster.createTopic(topic, partitions: 4)
        let total = 4_000
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        for index in 0..<total {
            try await producer.send(
                KafkaProducerMessage(
                    topic: topic, partition: nil, key: Array("k\(index)".utf8), value: Array("\(index)".utf8))
            ) { _ in }
        }
        try await producer.flush(timeout: .seconds(30))
        await producer.close()

        var configuration = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group)
        configuration.groupProtocol = .consumer
        configuration.properties["topic.metadata.refresh.interval.ms"] = "1000"
        let handlerA = RecordingRebalanceHandler()
        let handlerB = RecordingRebalanceHandler()
        let a = try KafkaConsumer(configuration: configuration, rebalanceHandler: handlerA)
        let b = try KafkaConsumer(configuration: configuration, rebalanceHandler: handlerB)
        handlerA.consumer.withLock { $0 = a }
        handlerB.consumer.withLock { $0 = b }
        let seenA = TestLocked<[Int]>([])
        let seenB = TestLocked<[Int]>([])
        func reader(
            _ consumer: KafkaConsumer, _ handler: RecordingRebalanceHandler, _ seen: TestLocked<[Int]>, pause: Bool
        )
            -> Task<Void, any Error>
        {
            Task {
                for try await record in consumer.messages {
                    let count = seen.withLock {
                        $0.append(Int(String(decoding: record.value ?? [], as: UTF8.self))!)
                        return $0.count
                    }
                    handler.processed(record)
                    if count % 50 == 0 { try? await handler.commitProcessed() }
                    if pause { try await Task.sleep(for: .milliseconds(2)) }
                }
            }
        }
        try a.subscribe(topics: [topic])
        let readerA = reader(a, handlerA, seenA, pause: true)
        try await withTimeout(30, "A's first records") {
            while seenA.withLock({ $0.count }) < 10 { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(a.assignment.count == 4)
        try b.subscribe(topics: [topic])
        let readerB = reader(b, handlerB, seenB, pause: false)
        try await withTimeout(60, "the split") {
            while a.assignment.isEmpty || b.assignment.isEmpty || a.assignment.count + b.assignment.count != 4 {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(a.assignment.isDisjoint(with: b.assignment))
        // Incremental: A gave up only what B took, and never all four at once.
        let firstRevocation = handlerA.events.first { if case .revoked = $0 { true } else { false } }
        if case .revoked(let partitions, let lost) = firstRevocation {
            #expect(!lost)
            #expect(partitions.count < 4, "A gave up \(partitions) when B joined")
        } else {
            Issue.record("A gave nothing up when B joined: \(handlerA.events)")
        }

        try await handOver(
            from: (a, readerA), to: (b, readerB), partitions: 4, untilRead: total, seen: [seenA, seenB])
        let all = seenA.withLock { $0 } + seenB.withLock { $0 }
        #expect(Set(all) == Set(0..<total), "no record lost")
        let lostAny = handlerA.events.contains { if case .revoked(_, lost: true) = $0 { true } else { false } }
        if !lostAny {
            // Each revocation committed what A had processed: B re-reads at most what A read between its
            // last commit and the hand-over, which the commit at the revocation covers.
            #expect(
                all.count - total <= 52,
                "read twice: \(all.count - total); A's commit failures: \(handlerA.commitFailures.withLock { $0 })")
        }
    }
}
