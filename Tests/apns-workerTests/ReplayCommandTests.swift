import Foundation
import Kafka
import Testing

/// `apns-worker replay` as the runbook uses it, against a mock Kafka cluster started here.
@Suite("apns-worker replay (the binary, on the mock cluster)", .timeLimit(.minutes(2)))
struct ReplayCommandTests {
    /// Credentials dead letters in a two-partition "dlq": the i-th from topic A (even i) or B (odd i).
    func cluster(deadLetters count: Int) async throws -> KafkaMockCluster {
        let cluster = try KafkaMockCluster(brokers: 1)
        try cluster.createTopic("dlq", partitions: 2)
        for topic in ["A", "B"] { try cluster.createTopic(topic, partitions: 1) }
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        for index in 0..<count {
            let headers = [
                KafkaHeader(key: "dlq-reason", string: "credentials"),
                KafkaHeader(key: "dlq-detail", string: "403 InvalidProviderToken"),
                KafkaHeader(key: "dlq-source-topic", string: index % 2 == 0 ? "A" : "B"),
                KafkaHeader(key: "dlq-last-failure-at", string: "2026-11-22T03:14:07.512Z"),
            ]
            _ = try await producer.send(
                KafkaProducerMessage(
                    topic: "dlq", partition: Int32(index % 3 == 0 ? 0 : 1), key: Array("k\(index)".utf8),
                    value: Array("dl-\(index)".utf8), headers: headers))
        }
        await producer.close()
        return cluster
    }

    func values(in topic: String, on cluster: KafkaMockCluster) async throws -> [String] {
        let reader = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "check"))
        defer { Task { await reader.close() } }
        let partition = KafkaTopicPartition(topic: topic, partition: 0)
        let end = try await reader.watermarks(of: partition).high
        guard end > 0 else { return [] }
        try reader.assign([KafkaTopicPartitionOffset(partition, offset: KafkaOffset.beginning)])
        var values: [String] = []
        for try await record in reader.messages {
            values.append(String(decoding: record.value ?? [], as: UTF8.self))
            if record.offset + 1 >= end { break }
        }
        return values
    }

    @Test("--source-topic A, then --source-topic B: every dead letter of each replayed once; a third run replays none")
    func filteredRuns() async throws {
        let cluster = try await cluster(deadLetters: 40)
        let helper = WorkerCommand()
        let common = [
            "replay", "--bootstrap-servers", cluster.bootstrapServers, "--from", "dlq", "--reason", "credentials",
        ]
        let a = try helper.run(common + ["--source-topic", "A"])
        #expect(a.status == 0, "\(a.stderr)")
        #expect(a.stdout.contains(Self.row("replayed", "A", 20)), "\(a.stdout)")
        let b = try helper.run(common + ["--source-topic", "B"])
        #expect(b.status == 0, "\(b.stderr)")
        #expect(b.stdout.contains(Self.row("replayed", "B", 20)), "\(b.stdout)")
        let again = try helper.run(common)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(!again.stdout.contains("replayed  "), "nothing left to replay: \(again.stdout)")
        #expect(
            try await values(in: "A", on: cluster).sorted()
                == stride(from: 0, to: 40, by: 2).map { "dl-\($0)" }.sorted())
        #expect(
            try await values(in: "B", on: cluster).sorted()
                == stride(from: 1, to: 40, by: 2).map { "dl-\($0)" }.sorted())
    }

    // Before: `--since 2026-12-02` was refused as "not an RFC 3339 time", with no example.
    @Test("--since takes a date alone (its start in UTC); a time it cannot read is refused with an example")
    func sinceDate() async throws {
        let cluster = try await cluster(deadLetters: 4)
        let helper = WorkerCommand()
        let common = ["replay", "--bootstrap-servers", cluster.bootstrapServers, "--from", "dlq"]
        let later = try helper.run(common + ["--since", "2026-11-23"])
        #expect(later.status == 0, "\(later.stderr)")
        #expect(!later.stdout.contains("replayed  "), "failed the day before: none replayed\n\(later.stdout)")
        let day = try helper.run(common + ["--since", "2026-11-22"])
        #expect(day.status == 0, "\(day.stderr)")
        #expect(day.stdout.contains(Self.row("replayed", "A", 2)), "\(day.stdout)")
        let unreadable = try helper.run(common + ["--since", "22/11/2026"])
        #expect(unreadable.status != 0)
        #expect(
            unreadable.stderr.contains(
                "--since: not an RFC 3339 time or a date: 22/11/2026 (for example 2026-12-02T09:30:00Z, or 2026-12-02"),
            "\(unreadable.stderr)")
    }

    /// A row of replay's table (action, reason, destination, count), as printed.
    static func row(_ action: String, _ destination: String, _ count: Int) -> String {
        func pad(_ text: String, _ width: Int) -> String {
            text + String(repeating: " ", count: max(1, width - text.count))
        }
        return pad(action, 24) + pad("credentials", 20) + pad(destination, 32) + String(count)
    }
}
