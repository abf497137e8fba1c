import Foundation
import Kafka
import Logging
import Testing

@testable import Worker

@Suite("Progress topic: done records where the broker drops commit metadata", .timeLimit(.minutes(2)))
struct ProgressTopicTests {
    let input = KafkaTopicPartition(topic: "events", partition: 3)
    let quiet = KafkaTopicPartition(topic: "events", partition: 4)

    func setUp() async throws -> (KafkaMockCluster, ProgressTopic, KafkaProducer) {
        let cluster = try KafkaMockCluster(brokers: 1)
        try cluster.createTopic("progress", partitions: 1)
        let progress = ProgressTopic(
            topic: "progress", group: "pushers",
            consumer: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "pushers"),
            logger: Logger(label: "test"))
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        return (cluster, progress, producer)
    }

    func write(
        _ progress: ProgressTopic, _ producer: KafkaProducer, _ partition: KafkaTopicPartition, committed: Int64,
        done: [Range<Int64>]
    ) async throws {
        let candidate = CommitCandidate(partition: partition, offset: committed, done: OffsetRanges(done), version: 1)
        for record in try await progress.records([candidate], metadataBytes: 4096) {
            try await producer.send(record) { _ in }
        }
        try await producer.flush(timeout: .seconds(30))
    }

    @Test("the newest record of a partition is found far back behind other partitions' records")
    func newestFarBack() async throws {
        let (cluster, progress, producer) = try await setUp()
        try await write(progress, producer, input, committed: 100, done: [101..<150])
        try await write(progress, producer, input, committed: 120, done: [130..<170, 171..<180])
        // Five thousand records of another partition after it: the lookup reads back past them.
        let candidates = (0..<5_000).map {
            CommitCandidate(
                partition: quiet, offset: Int64($0), done: OffsetRanges([Int64($0) + 2..<Int64($0) + 3]), version: 1)
        }
        for batch in stride(from: 0, to: candidates.count, by: 500) {
            for record in try await progress.records(
                Array(candidates[batch..<min(batch + 500, candidates.count)]), metadataBytes: 4096)
            {
                try await producer.send(record) { _ in }
            }
        }
        try await producer.flush(timeout: .seconds(30))
        let found = try await progress.read(committed: [input: 120])
        #expect(found[input] == OffsetRanges([130..<170, 171..<180]))
        // Only a record written for the committed offset itself is trusted: an older one may describe
        // a recreated topic, a later one a group moved back.
        #expect(try await progress.read(committed: [input: 150])[input] == nil)
        #expect(try await progress.read(committed: [input: 110])[input] == nil)
        await producer.close()
        withExtendedLifetime(cluster) {}
    }

    @Test("a partition without a record, or with one that cannot be read, has nothing known done")
    func missingOrUnreadable() async throws {
        let (cluster, progress, producer) = try await setUp()
        #expect(try await progress.read(committed: [input: 5]).isEmpty, "an empty topic")
        _ = try await producer.send(
            KafkaProducerMessage(topic: "progress", partition: 0, key: progress.key(input), value: Array("{}".utf8)))
        #expect(try await progress.read(committed: [input: 5]).isEmpty)
        await producer.close()
        withExtendedLifetime(cluster) {}
    }
}
