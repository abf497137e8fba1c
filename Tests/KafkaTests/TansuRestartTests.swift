import Foundation
import Kafka
import TestPeers
import Testing

/// Tansu on S3 storage (a moto S3 server of its own) stopped and started again on the same port,
/// behind the same proxy: what clients find afterwards. In memory, a restart loses every topic.
@Suite("Tansu restarted with its data", .timeLimit(.minutes(3)))
struct TansuRestartTests {
    static let signals: [Int32] = [SIGTERM, SIGKILL]

    @Test(
        "records and the group's committed offsets survive a broker restart; the group resumes where it committed",
        arguments: signals)
    func recordsAndOffsetsSurvive(_ signal: Int32) async throws {
        let cluster = try await TestCluster.start(.tansu, tansuStorage: .s3)
        defer { Task { await cluster.shutdown() } }
        let tansu = try #require(cluster.tansu)
        let topic = uniqueName("restart")
        try await cluster.createTopic(topic, partitions: 2)

        // 100 records; the producer stays connected across the restart.
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        var stored: Set<Stored> = []
        for index in 0..<100 {
            let report = try await producer.send(
                KafkaProducerMessage(topic: topic, key: Array("k\(index % 7)".utf8), value: Array("v\(index)".utf8)))
            stored.insert(Stored(partition: report.partition, offset: report.offset, value: "v\(index)"))
        }
        // A group reads them all and commits half of each partition.
        let group = uniqueName("g")
        let first = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: group))
        try first.subscribe(topics: [topic])
        let firstRead = try await read(100, from: first)
        #expect(Set(firstRead.map(Stored.init)) == stored)
        let ends = Dictionary(grouping: stored, by: \.partition).mapValues { $0.count }
        let committed = ends.mapValues { Int64($0 / 2) }
        try await first.commit(
            committed.map {
                KafkaTopicPartitionOffset(KafkaTopicPartition(topic: topic, partition: $0.key), offset: $0.value)
            })
        await first.close()

        let stop = try await tansu.restart(signal: signal)
        print("Tansu on S3, \(stop)")
        #expect(!stop.killedAfterGrace, "\(stop)")
        // SIGTERM: Tansu's own shutdown ran to its end.
        #expect(stop.exitStatus == (signal == SIGKILL ? 128 + SIGKILL : 0), "\(stop)")

        // Every record is there, at its offset, once.
        let reader = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: uniqueName("fresh")))
        try reader.subscribe(topics: [topic])
        let after = try await read(100, from: reader, within: 120)
        #expect(Set(after.map(Stored.init)) == stored, "records after the restart")
        await reader.close()

        // The group's offsets are there: it resumes at them, nothing before them is read again.
        let resumed = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: group))
        let partitions = ends.keys.map { KafkaTopicPartition(topic: topic, partition: $0) }
        let offsets = try await resumed.committedOffsets(for: partitions)
        #expect(
            offsets.mapValues { $0 ?? -1 }
                == Dictionary(uniqueKeysWithValues: partitions.map { ($0, committed[$0.partition]!) }))
        try resumed.subscribe(topics: [topic])
        let remaining = 100 - committed.values.reduce(0, +)
        // The same producer writes again: its records go after the old ones.
        for index in 100..<110 {
            let report = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("v\(index)".utf8)))
            #expect(report.offset >= Int64(ends[report.partition] ?? 0), "a record written over an old one")
            stored.insert(Stored(partition: report.partition, offset: report.offset, value: "v\(index)"))
        }
        await producer.close()
        let rest = try await read(Int(remaining) + 10, from: resumed, within: 120)
        let readAgain = rest.filter { $0.offset < committed[$0.partition]! }.count
        print("Tansu on S3, \(stop): the group read \(rest.count) records after the restart, \(readAgain) again")
        #expect(readAgain == 0, "records before the committed offsets read again")
        #expect(Set(rest.map(Stored.init)) == stored.filter { $0.offset >= committed[$0.partition]! })
        // Nothing more than that arrives.
        let extra = try await readAvailable(from: resumed, for: 2)
        #expect(extra.isEmpty, "\(extra.count) more records")
        await resumed.close()
        #expect(tansu.isRunning)
    }

    @Test("in memory, a restart comes back empty (the reason the rows that restart the broker run on S3)")
    func memoryLosesEverything() async throws {
        let cluster = try await TestCluster.start(.tansu)
        defer { Task { await cluster.shutdown() } }
        let tansu = try #require(cluster.tansu)
        let topic = uniqueName("gone")
        try await cluster.createTopic(topic, partitions: 1)
        try await tansu.restart(signal: SIGKILL)
        let consumer = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: uniqueName("g")))
        let names = try await consumer.topicNames()
        #expect(!names.contains(topic))
        await consumer.close()
    }

    struct Stored: Hashable {
        var partition: Int32
        var offset: Int64
        var value: String

        init(partition: Int32, offset: Int64, value: String) {
            self.partition = partition
            self.offset = offset
            self.value = value
        }

        init(_ record: KafkaConsumerMessage) {
            self.init(
                partition: record.partition, offset: record.offset,
                value: String(decoding: record.value ?? [], as: UTF8.self))
        }
    }
}
