import Foundation
import Kafka
import Logging
import TestPeers
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
    // On Tansu, ListOffsets answers one past the first offset of the last batch; one commit's records
    // for several partitions go out in one batch, so the lookup read only the first of them, and the
    // other partitions' next owners pushed their done events again.
    @Test("on Tansu, every record of the last batch is found: one commit's records for several partitions")
    func lastBatchOnTansu() async throws {
        let tansu = try await TansuBroker.start()
        defer { Task { await tansu.shutdown() } }
        try await tansu.createTopic("progress", partitions: 1)
        let progress = ProgressTopic(
            topic: "progress", group: "pushers",
            consumer: KafkaConsumerConfiguration(bootstrapServers: tansu.bootstrapServers, groupID: "pushers"),
            logger: Logger(label: "test"))
        var configuration = KafkaProducerConfiguration(bootstrapServers: tansu.bootstrapServers)
        configuration.linger = .milliseconds(50)  // one batch, as a commit's records are sent together
        let producer = try KafkaProducer(configuration: configuration)
        let partitions = (0..<6).map { KafkaTopicPartition(topic: "events", partition: Int32($0)) }
        let candidates = partitions.map {
            CommitCandidate(partition: $0, offset: 10, done: OffsetRanges([12..<20]), version: 1)
        }
        for record in try await progress.records(candidates, metadataBytes: 4096) {
            try await producer.send(record) { _ in }
        }
        try await producer.flush(timeout: .seconds(30))
        await producer.close()
        let found = try await progress.read(committed: Dictionary(uniqueKeysWithValues: partitions.map { ($0, 10) }))
        #expect(found.count == partitions.count, "found \(found.keys.sorted()) of \(partitions.count)")
        #expect(found.values.allSatisfy { $0 == OffsetRanges([12..<20]) })
    }

    // An ended lease's record can land after the next owner's (a revocation that could not commit
    // writes its done records late): it must not hide the record written for the committed offset.
    @Test("a newer record written for an offset below the committed one is passed over for the one written for it")
    func staleRecordAfterTheCurrentOne() async throws {
        let (cluster, progress, producer) = try await setUp()
        try await write(progress, producer, input, committed: 120, done: [130..<170])
        try await write(progress, producer, input, committed: 100, done: [101..<110])  // late, from the last owner
        #expect(try await progress.read(committed: [input: 120])[input] == OffsetRanges([130..<170]))
        #expect(try await progress.read(committed: [input: 150])[input] == nil, "none written for 150")
        await producer.close()
        withExtendedLifetime(cluster) {}
    }
}
