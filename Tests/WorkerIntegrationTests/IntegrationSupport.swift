import APNsSimulator
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import Testing
import Worker
import WorkerDemo

/// A result event as downstream consumers see it.
struct ResultRecord: Sendable {
    let eventID: String?
    let outcome: ResultOutcome
    let status: Int?
    let reason: String?
    let attempts: Int
    let sourcePartition: Int
    let sourceOffset: Int64
    let record: KafkaConsumerMessage

    init(_ record: KafkaConsumerMessage) throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any])
        eventID = object["eventId"] as? String
        outcome = try #require(ResultOutcome(rawValue: object["outcome"] as? String ?? ""))
        status = object["status"] as? Int
        reason = object["reason"] as? String
        attempts = object["attempts"] as? Int ?? -1
        let source = try #require(object["source"] as? [String: Any])
        sourcePartition = try #require(source["partition"] as? Int)
        sourceOffset = Int64(try #require(source["offset"] as? Int))
        self.record = record
    }

    var sourceKey: String { "\(sourcePartition)/\(sourceOffset)" }
}

/// The embedded stack plus helpers to produce, run workers and read what came out.
struct Harness: Sendable {
    let stack: EmbeddedStack
    let logger: Logger

    static func start(partitions: Int = 4) async throws -> Harness {
        var logger = Logger(label: "integration")
        logger.logLevel =
            Logger.Level(rawValue: ProcessInfo.processInfo.environment["INTEGRATION_LOG"] ?? "") ?? .critical
        return Harness(stack: try await EmbeddedStack.start(partitions: partitions, logger: logger), logger: logger)
    }

    func produce(_ records: [KafkaProducerMessage]) async throws {
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: stack.cluster.bootstrapServers), logger: logger)
        for record in records {
            try await producer.send(record) { _ in }
        }
        try await producer.flush(timeout: .seconds(60))
        await producer.close()
    }

    /// A worker as `apns-worker run` assembles it, started; stop it with `triggerGracefulShutdown`.
    func startWorker(
        group: String = "integration", maxInFlight: Int = 2000,
        configure: (inout WorkerConfiguration) -> Void = { _ in }
    ) throws -> RunningWorker {
        var configuration = try stack.configuration(group: group, maxInFlight: maxInFlight)
        configure(&configuration)
        let assembly = try WorkerRuntime.assemble(configuration, logger: logger)
        let serviceGroup = assembly.serviceGroup(handlingSignals: false)
        let task = Task { try await serviceGroup.run() }
        return RunningWorker(assembly: assembly, group: serviceGroup, task: task)
    }

    /// One record per source record (duplicates after a rebalance or crash count once), or throws.
    func results(_ count: Int, timeout: Duration = .seconds(120)) async throws -> [ResultRecord] {
        try await Demo.readTopic(
            EmbeddedStack.resultsTopic, from: stack, until: count, timeout: timeout, logger: logger
        )
        .map(ResultRecord.init)
    }

    func deadLetters(_ count: Int, timeout: Duration = .seconds(60)) async throws -> [KafkaConsumerMessage] {
        try await Demo.readTopic(
            EmbeddedStack.deadLetterTopic, from: stack, until: count, timeout: timeout, logger: logger)
    }

    /// Every record of a topic as stored, duplicates included.
    func allRecords(of topic: String) async throws -> [KafkaConsumerMessage] {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: stack.cluster.bootstrapServers, groupID: "raw-reader"),
            logger: logger)
        var ends: [KafkaTopicPartition: Int64] = [:]
        for id in try await consumer.partitions(of: topic) {
            let partition = KafkaTopicPartition(topic: topic, partition: id)
            ends[partition] = try await consumer.watermarks(of: partition).high
        }
        let total = ends.values.reduce(0) { $0 + Int($1) }
        guard total > 0 else {
            await consumer.close()
            return []
        }
        try consumer.assign(ends.keys.map { KafkaTopicPartitionOffset($0, offset: KafkaOffset.beginning) })
        var records: [KafkaConsumerMessage] = []
        for try await record in consumer.messages {
            records.append(record)
            if records.count == total { break }
        }
        await consumer.close()
        return records
    }

    /// The group's committed offset of every input partition, next to the partition's end.
    func commitProgress(group: String) async throws -> [(committed: Int64?, end: Int64)] {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: stack.cluster.bootstrapServers, groupID: group),
            logger: logger)
        var progress: [(Int64?, Int64)] = []
        let partitions = try await consumer.partitions(of: EmbeddedStack.inputTopic)
            .map { KafkaTopicPartition(topic: EmbeddedStack.inputTopic, partition: $0) }
        let committed = try await consumer.committedOffsets(for: partitions)
        for partition in partitions {
            progress.append((committed[partition] ?? nil, try await consumer.watermarks(of: partition).high))
        }
        await consumer.close()
        return progress
    }

    func shutdown() async {
        await stack.shutdown()
    }
}

struct RunningWorker: Sendable {
    let assembly: WorkerRuntime.Assembly
    let group: ServiceGroup
    let task: Task<Void, any Error>

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}

/// Polls `condition` until it holds, or fails after `seconds`.
/// `state` describes what was seen instead, for the failure message.
func eventually(
    _ seconds: Double, _ what: String, state: @Sendable () -> String = { "" },
    _ condition: @Sendable () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(100))
    }
    Issue.record("timed out after \(seconds) s waiting for \(what) \(state())")
    throw CancellationError()
}
