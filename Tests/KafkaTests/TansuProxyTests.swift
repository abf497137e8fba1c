import Foundation
import Kafka
import NIOCore
import TestPeers
import Testing

@Suite("The proxy in front of Tansu", .timeLimit(.minutes(2)))
struct TansuProxyTests {
    /// An ApiVersions v3 answer as Tansu shapes it: each entry and the end carry tagged fields.
    static func apiVersionsResponse(entries: [(Int16, Int16, Int16)], topLevelTags: [(UInt8, [UInt8])]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(Int32(7))  // correlation id
        buffer.writeInteger(Int16(0))  // error code
        buffer.writeInteger(UInt8(entries.count + 1))
        for (key, low, high) in entries {
            buffer.writeInteger(key)
            buffer.writeInteger(low)
            buffer.writeInteger(high)
            buffer.writeInteger(UInt8(1))  // one tagged field of 2 bytes in this entry
            buffer.writeBytes([0, 2, 0xAA, 0xBB])
        }
        buffer.writeInteger(Int32(0))  // throttle
        buffer.writeInteger(UInt8(topLevelTags.count))
        for (tag, data) in topLevelTags {
            buffer.writeInteger(tag)
            buffer.writeInteger(UInt8(data.count))
            buffer.writeBytes(data)
        }
        return buffer
    }

    @Test("an ApiVersions v3 answer keeps its content and loses every tagged field; anything else passes")
    func rewrite() throws {
        let original = Self.apiVersionsResponse(
            entries: [(0, 0, 9), (18, 0, 3)], topLevelTags: [(0, [1, 2, 3]), (1, Array(repeating: 9, count: 8))])
        let rewritten = try #require(KafkaApiVersionsRewrite.rewrite(response: original))
        var expected = ByteBuffer()
        expected.writeInteger(Int32(7))
        expected.writeInteger(Int16(0))
        expected.writeInteger(UInt8(3))
        for (key, low, high) in [(Int16(0), Int16(0), Int16(9)), (18, 0, 3)] {
            expected.writeInteger(key)
            expected.writeInteger(low)
            expected.writeInteger(high)
            expected.writeInteger(UInt8(0))
        }
        expected.writeInteger(Int32(0))
        expected.writeInteger(UInt8(0))
        #expect(rewritten == expected)

        // Truncated or with bytes past its end: not an answer this knows, forwarded as it was.
        #expect(KafkaApiVersionsRewrite.rewrite(response: original.getSlice(at: 0, length: 20)!) == nil)
        var longer = original
        longer.writeInteger(UInt8(0))
        #expect(KafkaApiVersionsRewrite.rewrite(response: longer) == nil)

        var request = ByteBuffer()
        request.writeInteger(Int16(18))
        request.writeInteger(Int16(3))
        request.writeInteger(Int32(42))
        #expect(KafkaApiVersionsRewrite.correlationToRewrite(request: request) == 42)
        request.setInteger(Int16(2), at: 2)
        #expect(KafkaApiVersionsRewrite.correlationToRewrite(request: request) == nil, "v2 has no tags")
        request.setInteger(Int16(3), at: 0)
        #expect(KafkaApiVersionsRewrite.correlationToRewrite(request: request) == nil, "not ApiVersions")
    }

    @Test("clients reach Tansu only through the proxy, which rewrites each connection's ApiVersions answer")
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
        #expect(statistics.rewritten == statistics.accepted, "every connection asks ApiVersions once: \(statistics)")
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
