import APNsSimulator
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import ReliabilityMatrix
import ServiceLifecycle
import TestPeers
import Testing
import Worker
import WorkerDemo
import WorkerTelemetry

/// A result event as downstream consumers see it.
struct ResultRecord: Sendable {
    let eventID: String?
    let outcome: ResultOutcome
    let status: Int?
    let reason: String?
    let detail: String?
    let attempts: Int
    let sourceTopic: String
    let sourcePartition: Int
    let sourceOffset: Int64
    let record: KafkaConsumerMessage

    init(_ record: KafkaConsumerMessage) throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any])
        eventID = object["eventId"] as? String
        outcome = try #require(ResultOutcome(rawValue: object["outcome"] as? String ?? ""))
        status = object["status"] as? Int
        reason = object["reason"] as? String
        detail = object["detail"] as? String
        attempts = object["attempts"] as? Int ?? -1
        let source = try #require(object["source"] as? [String: Any])
        sourceTopic = try #require(source["topic"] as? String)
        sourcePartition = try #require(source["partition"] as? Int)
        sourceOffset = Int64(try #require(source["offset"] as? Int))
        self.record = record
    }

    var sourceKey: String { "\(sourceTopic)/\(sourcePartition)/\(sourceOffset)" }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
}

/// The embedded stack plus helpers to produce, run workers and read what came out.
struct Harness: Sendable {
    let stack: EmbeddedStack
    let logger: Logger
    let broker: Broker
    /// The Tansu broker when the stack runs on it (its proxy is where the network breaks).
    let tansu: TansuBroker?

    /// `security`: what Tansu's proxy asks of clients (TLS, SASL; Tansu only). The harness's own
    /// clients are plain: give it `admitsPlainClients`.
    /// `groupProtocol`: the consumer group protocol of the workers' configurations (the next-generation
    /// one on the mock cluster only: Tansu does not speak it).
    static func start(
        broker: Broker = .mock, partitions: Int = 4, security: ProxySecurity? = nil,
        groupProtocol: KafkaGroupProtocol = .classic
    ) async throws -> Harness {
        var logger = Logger(label: "integration")
        logger.logLevel =
            Logger.Level(rawValue: ProcessInfo.processInfo.environment["INTEGRATION_LOG"] ?? "") ?? .critical
        let tansu = broker == .tansu ? try await TansuBroker.start(security: security) : nil
        do {
            let stack = try await EmbeddedStack.start(
                partitions: partitions, kafka: tansu.map(TansuCluster.init), groupProtocol: groupProtocol,
                logger: logger)
            return Harness(stack: stack, logger: logger, broker: broker, tansu: tansu)
        } catch {
            await tansu?.shutdown()
            throw error
        }
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
    /// `logger`: the worker's, when a test reads what it logs.
    func startWorker(
        group: String = "integration", maxInFlight: Int = 2000, logger: Logger? = nil,
        configure: (inout WorkerConfiguration) -> Void = { _ in }
    ) throws -> RunningWorker {
        var configuration = try stack.configuration(group: group, maxInFlight: maxInFlight)
        configure(&configuration)
        let assembly = try WorkerRuntime.assemble(
            configuration, logger: logger ?? self.logger, spanExporter: .otlp)
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
        try await readToEnd(of: topic).records
    }

    /// The group's committed offset of every input partition, next to the partition's end.
    func commitProgress(group: String) async throws -> [(committed: Int64?, end: Int64)] {
        let ends = try await readToEnd(of: EmbeddedStack.inputTopic).ends
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: stack.cluster.bootstrapServers, groupID: group),
            logger: logger)
        let partitions = ends.keys.sorted()
        let committed = try await consumer.committedOffsets(for: partitions)
        await consumer.close()
        return partitions.map { (committed[$0] ?? nil, ends[$0]!) }
    }

    /// What the group committed for the input topic's partition 0: the offset and the done records
    /// its metadata names above it (nil: nothing committed).
    func committedProgress(group: String) async throws -> (offset: Int64, done: OffsetRanges)? {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: stack.cluster.bootstrapServers, groupID: group),
            logger: logger)
        let partition = KafkaTopicPartition(topic: EmbeddedStack.inputTopic, partition: 0)
        let stored = try await consumer.committed([partition])[partition]
        await consumer.close()
        guard let stored else { return nil }
        let done = stored.metadata.flatMap { try? CommitMetadata.decode($0, committed: stored.offset).done }
        return (stored.offset, done ?? OffsetRanges())
    }

    /// Commits `offset` with `metadata` for the input topic's partition 0, as group `group` (a
    /// member that left, or another program, would have).
    func commit(group: String, offset: Int64, metadata: String?) async throws {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: stack.cluster.bootstrapServers, groupID: group),
            logger: logger)
        try await consumer.commit([
            KafkaTopicPartitionOffset(
                KafkaTopicPartition(topic: EmbeddedStack.inputTopic, partition: 0), offset: offset, metadata: metadata)
        ])
        await consumer.close()
    }

    /// Reads a whole topic, and where each partition ends. The end is the one fetch responses
    /// report, not a ListOffsets answer: Tansu's lags behind the log when the last batch held more
    /// than one record.
    func readToEnd(of topic: String) async throws -> (
        records: [KafkaConsumerMessage], ends: [KafkaTopicPartition: Int64]
    ) {
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: stack.cluster.bootstrapServers, groupID: "raw-reader"),
            logger: logger)
        let partitions = try await consumer.partitions(of: topic).map {
            KafkaTopicPartition(topic: topic, partition: $0)
        }
        try consumer.assign(partitions.map { KafkaTopicPartitionOffset($0, offset: KafkaOffset.beginning) })
        let state = NIOLockedValueBox<(records: [KafkaConsumerMessage], next: [KafkaTopicPartition: Int64])>(([], [:]))
        let reader = Task {
            for try await record in consumer.messages {
                state.withLockedValue {
                    $0.records.append(record)
                    $0.next[record.topicPartition] = record.offset + 1
                }
            }
        }
        defer { reader.cancel() }
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            try await Task.sleep(for: .milliseconds(50))
            let next = state.withLockedValue { $0.next }
            var ends: [KafkaTopicPartition: Int64] = [:]
            for partition in partitions {
                guard let high = consumer.fetchedHighWatermark(of: partition), (next[partition] ?? 0) >= high else {
                    break
                }
                ends[partition] = high
            }
            if ends.count == partitions.count {
                reader.cancel()
                _ = await reader.result
                await consumer.close()
                return (state.withLockedValue { $0.records }, ends)
            }
            guard ContinuousClock.now < deadline else {
                reader.cancel()
                await consumer.close()
                throw HarnessError(description: "timed out reading \(topic) to its end")
            }
        }
    }

    func shutdown() async {
        await stack.shutdown()
        await tansu?.shutdown()
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
