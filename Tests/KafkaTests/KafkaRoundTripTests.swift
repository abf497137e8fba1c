import Foundation
import Kafka
import TestPeers
import Testing

@Suite("Kafka producer and consumer", .timeLimit(.minutes(2)))
struct KafkaRoundTripTests {
    // On the mock cluster: 3 brokers, 3 replicas. On Tansu: one node, through the proxy every test
    // on Tansu goes through.
    @Test(
        "10,000 records with headers over 4 partitions, each consumed exactly once, bytes intact",
        arguments: Broker.allCases)
    func produceAndConsumeEverything(_ broker: Broker) async throws {
        let cluster = try await TestCluster.start(broker, mockBrokers: 3)
        defer { Task { await cluster.shutdown() } }
        let topic = uniqueName("roundtrip")
        try await cluster.createTopic(topic, partitions: 4, mockReplicationFactor: 3)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))

        let count = 10_000
        let delivered = TestLocked<[Int: KafkaDeliveryReport]>([:])
        let failures = TestLocked<[KafkaError]>([])
        for index in 0..<count {
            let record = KafkaProducerMessage(
                topic: topic, key: Array("key-\(index)".utf8),
                value: Array("value-\(index)-\(String(repeating: "x", count: index % 50))".utf8),
                headers: [
                    KafkaHeader(key: "index", string: String(index)),
                    KafkaHeader(key: "binary", value: [0, 1, 2, 255]),
                    KafkaHeader(key: "null", value: nil),
                    KafkaHeader(key: "index", string: "repeated"),
                ])
            try await producer.send(record) { result in
                switch result {
                case .success(let report): delivered.withLock { $0[index] = report }
                case .failure(let error): failures.withLock { $0.append(error) }
                }
            }
        }
        try await producer.flush(timeout: .seconds(30))
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(delivered.withLock { $0.count } == count)
        let partitionsUsed = Set(delivered.withLock { $0.values.map(\.partition) })
        #expect(partitionsUsed == [0, 1, 2, 3])

        let consumer = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: uniqueName("g")))
        try consumer.subscribe(topics: [topic])
        let records = try await read(count, from: consumer, within: 60)
        await consumer.close()
        await producer.close()

        var seen = Set<Int>()
        for record in records {
            let key = String(decoding: record.key ?? [], as: UTF8.self)
            let index = try #require(Int(key.dropFirst("key-".count)))
            #expect(seen.insert(index).inserted, "record \(index) consumed twice")
            #expect(record.value == Array("value-\(index)-\(String(repeating: "x", count: index % 50))".utf8))
            #expect(record.headers.map(\.key) == ["index", "binary", "null", "index"])
            #expect(record.headers[0].stringValue == String(index))
            #expect(record.headers[1].value == [0, 1, 2, 255])
            #expect(record.headers[2].value == nil)
            #expect(record.headers.lastString("index") == "repeated")
            let report = try #require(delivered.withLock { $0[index] })
            #expect(record.partition == report.partition && record.offset == report.offset)
            #expect(report.topic == topic)
            #expect(record.timestampMilliseconds != nil)
        }
        #expect(seen.count == count)
    }

    @Test("a record sent while its broker is down is delivered once the broker is back")
    func produceSurvivesBrokerDown() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        let topic = uniqueName("down")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("warm-up".utf8)))

        try cluster.setBroker(1, up: false)
        let result = TestLocked<Result<KafkaDeliveryReport, KafkaError>?>(nil)
        try await producer.send(KafkaProducerMessage(topic: topic, value: Array("while-down".utf8))) { outcome in
            result.withLock { $0 = outcome }
        }
        try await Task.sleep(for: .seconds(2))
        #expect(result.withLock { $0 } == nil, "nothing can be acknowledged while the only broker is down")
        #expect(producer.pendingCount == 1)

        try cluster.setBroker(1, up: true)
        try await producer.flush(timeout: .seconds(30))
        let report = try #require(try result.withLock { $0 }?.get())
        #expect(report.offset == 1)

        let consumer = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: uniqueName("g")))
        try consumer.subscribe(topics: [topic])
        let records = try await read(2, from: consumer)
        #expect(records.map { String(decoding: $0.value ?? [], as: UTF8.self) } == ["warm-up", "while-down"])
        await consumer.close()
        await producer.close()
    }

    @Test("a fatal producer error reaches onFatalError once, and every later send fails with it")
    func fatalErrorIsReported() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        let topic = uniqueName("fatal")
        try cluster.createTopic(topic, partitions: 1)
        let reported = TestLocked<[KafkaError]>([])
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster)) { error in
            reported.withLock { $0.append(error) }
        }
        _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("before".utf8)))
        producer.raiseFatalErrorForTesting("test: sequence broken")
        try await withTimeout(10, "the fatal error reported") {
            while reported.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(20)) }
        }
        let error = try #require(reported.withLock { $0.first })
        #expect(error.isFatal && error.produceFailureScope == .fatal)
        #expect(error.message.contains("sequence broken"), "\(error)")
        do {
            try producer.trySend(KafkaProducerMessage(topic: topic, value: Array("after".utf8))) { _ in }
            Issue.record("a send after a fatal error was accepted")
        } catch {
            #expect(error.isFatal, "\(error)")
        }
        await producer.close(timeout: .seconds(1))
        #expect(reported.withLock { $0.count } == 1)
    }

    @Test("a refused configuration property is named in the error")
    func badPropertyIsNamed() throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: "127.0.0.1:1")
        configuration.properties["no.such.property"] = "1"
        #expect {
            _ = try KafkaProducer(configuration: configuration)
        } throws: { error in
            (error as? KafkaError)?.property == "no.such.property"
        }
        var consumerConfiguration = KafkaConsumerConfiguration(bootstrapServers: "127.0.0.1:1", groupID: "g")
        consumerConfiguration.properties["session.timeout.ms"] = "not-a-number"
        #expect {
            _ = try KafkaConsumer(configuration: consumerConfiguration)
        } throws: { error in
            let error = error as? KafkaError
            return error?.property == "session.timeout.ms" && error?.description.contains("session.timeout.ms") == true
        }
    }

    // Without it, librdkafka asked for a topic's metadata only when its first record arrived, and
    // the worker's first results after a start waited 400 to 500 ms for the answer.
    //
    // Known partitions show as a record to one that does not exist being refused as it is enqueued;
    // a producer that does not know them yet enqueues it, asks, and fails it later. `probe` tells
    // when the metadata has come (its first such record asks for it, so only later ones are
    // refused); `watched` is asked about once, after that: prepared first, its answer came first.
    @Test("a producer prepared for topics learns their partitions before their first record, and still delivers")
    func preparedTopicIsKnownBeforeTheFirstRecord() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        let watched = uniqueName("prepared")
        let probe = uniqueName("probe")
        try cluster.createTopic(watched, partitions: 2)
        try cluster.createTopic(probe, partitions: 2)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        producer.prepare(topics: [watched, probe])
        let unknownPartition = { (topic: String) -> Bool in
            do {
                try producer.trySend(KafkaProducerMessage(topic: topic, partition: 7, value: [1])) { _ in }
                return false
            } catch {
                return true
            }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while !unknownPartition(probe), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(unknownPartition(watched), "the first record to a missing partition is refused at once")
        let report = try await producer.send(KafkaProducerMessage(topic: watched, partition: 1, value: [1]))
        #expect(report.partition == 1)
        await producer.close()
    }

    @Test("a record to a partition that does not exist fails with a clear error")
    func unknownPartition() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        let topic = uniqueName("parts")
        try cluster.createTopic(topic, partitions: 2)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        _ = try await producer.send(KafkaProducerMessage(topic: topic, partition: 1, value: [1]))
        await #expect(throws: KafkaError.self) {
            _ = try await producer.send(KafkaProducerMessage(topic: topic, partition: 7, value: [1]))
        }
        await producer.close()
        await #expect(throws: KafkaError.self) {
            _ = try await producer.send(KafkaProducerMessage(topic: topic, value: [1]))
        }
    }
}
