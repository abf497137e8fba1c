import Foundation
import Kafka
import TestPeers
import Testing

/// kcat is an independent Kafka client (Debian's `kcat`, run on the librdkafka the tests load, see
/// `Kcat`): records it writes, we read, and the reverse, on both brokers (on Tansu through the same
/// proxy, which passes every byte as it is).
@Suite("Interop with kcat", .timeLimit(.minutes(2)))
struct KcatInteropTests {
    /// Runs kcat with `arguments`, feeding `input`, and returns its standard output.
    func kcat(_ arguments: [String], input: String = "") throws -> String {
        let kcat = try Kcat.run(arguments, stdin: Array(input.utf8))
        #expect(kcat.status == 0, "kcat failed: \(kcat.stderr)")
        return kcat.stdout
    }

    @Test("kcat runs on the librdkafka these tests load")
    func kcatsLibrary() throws {
        // Debian 12's kcat on its own library (2.0.2) cannot read Tansu's ApiVersions answer.
        #expect(try Kcat.libraryVersion() == KafkaLibrary.version, "\(Kcat.libraryDirectory ?? "no librdkafka loaded")")
    }

    @Test("kcat produces, our consumer reads keys, values and headers", arguments: Broker.allCases)
    func kcatToUs(_ broker: Broker) async throws {
        let cluster = try await TestCluster.start(broker)
        defer { Task { await cluster.shutdown() } }
        let topic = uniqueName("from-kcat")
        try await cluster.createTopic(topic, partitions: 2)
        let lines = (0..<100).map { "key\($0)|value \($0)" }.joined(separator: "\n") + "\n"
        _ = try kcat(["-b", cluster.bootstrapServers, "-P", "-t", topic, "-K", "|", "-H", "origin=kcat"], input: lines)

        let consumer = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: uniqueName("g")))
        try consumer.subscribe(topics: [topic])
        let records = try await read(100, from: consumer)
        await consumer.close()
        let byKey = Dictionary(
            uniqueKeysWithValues: records.map {
                (String(decoding: $0.key ?? [], as: UTF8.self), String(decoding: $0.value ?? [], as: UTF8.self))
            })
        #expect(byKey.count == 100)
        for index in 0..<100 { #expect(byKey["key\(index)"] == "value \(index)") }
        #expect(records.allSatisfy { $0.headers.lastString("origin") == "kcat" })
    }

    @Test("our producer writes, kcat reads keys, values and headers", arguments: Broker.allCases)
    func usToKcat(_ broker: Broker) async throws {
        let cluster = try await TestCluster.start(broker)
        defer { Task { await cluster.shutdown() } }
        let topic = uniqueName("to-kcat")
        try await cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        for index in 0..<50 {
            _ = try await producer.send(
                KafkaProducerMessage(
                    topic: topic, key: Array("k\(index)".utf8), value: Array("v\(index)".utf8),
                    headers: [KafkaHeader(key: "n", string: "\(index)")]))
        }
        await producer.close()
        let output = try kcat(["-b", cluster.bootstrapServers, "-C", "-t", topic, "-e", "-q", "-f", "%k=%s %h %o\\n"])
        let lines = output.split(separator: "\n").map(String.init)
        #expect(lines == (0..<50).map { "k\($0)=v\($0) n=\($0) \($0)" })
    }
}
