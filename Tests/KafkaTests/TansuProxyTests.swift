import Foundation
import Kafka
import NIOCore
import TestPeers
import Testing

@Suite("The proxy in front of Tansu", .timeLimit(.minutes(2)))
struct TansuProxyTests {
    @Test("clients reach Tansu only through the proxy, which passes Tansu's answers as they are")
    func everythingGoesThroughTheProxy() async throws {
        let cluster = try await TestCluster.start(.tansu)
        defer { Task { await cluster.shutdown() } }
        let tansu = try #require(cluster.tansu)
        let topic = uniqueName("proxied")
        try await cluster.createTopic(topic, partitions: 2)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        for index in 0..<100 {
            _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("\(index)".utf8)))
        }
        await producer.close()
        let statistics = await tansu.proxy.currentStatistics
        #expect(statistics.accepted >= 1)
        #expect(statistics.bytesUp > 100 * 2, "the records went through the proxy: \(statistics)")
    }

    @Test("a black hole stalls the consumer without an error; once healed, every record arrives once")
    func blackHoleThenHeal() async throws {
        let cluster = try await TestCluster.start(.tansu)
        defer { Task { await cluster.shutdown() } }
        let tansu = try #require(cluster.tansu)
        let topic = uniqueName("blackhole")
        try await cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        for index in 0..<10 {
            _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("\(index)".utf8)))
        }
        let consumer = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: uniqueName("g")))
        try consumer.subscribe(topics: [topic])
        #expect(try await read(10, from: consumer).count == 10)

        await tansu.proxy.setBlackHole(true)
        // Sent now, the records wait in the producer; nothing reaches the consumer.
        let sends = Task {
            for index in 10..<20 {
                _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("\(index)".utf8)))
            }
        }
        let during = try await readAvailable(from: consumer, for: 3)
        #expect(during.isEmpty, "\(during.count) records crossed a black hole")
        await tansu.proxy.setBlackHole(false)
        try await sends.value
        let after = try await read(10, from: consumer, within: 60)
        #expect(after.map { String(decoding: $0.value ?? [], as: UTF8.self) } == (10..<20).map(String.init))
        await producer.close()
        await consumer.close()
    }
}
