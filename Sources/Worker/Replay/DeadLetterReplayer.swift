import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers

/// Puts dead letters back: reads a dead-letter topic up to the end offsets it saw when it started
/// (records dead-lettered during the run wait for the next run), applies the request's filters, and
/// re-produces each chosen record with an idempotent producer.
///
/// It remembers: each reason has a cursor, the offsets of a consumer group of its own
/// (`<groupID>.<reason>`), committed after the records before it are stored. A run starts at the
/// cursors and moves them to where it stopped, so running the same replay twice replays once, and
/// a run that fails part-way resumes where its last checkpoint was (records after it may be
/// produced again: at least once). `fromBeginning` ignores the cursors.
package struct DeadLetterReplayer: Sendable {
    package var consumerConfiguration: KafkaConsumerConfiguration
    package var producerConfiguration: KafkaProducerConfiguration
    /// A run that receives nothing for this long, with dead letters still to read, fails.
    package var stallTimeout: Duration = .seconds(30)
    package var logger: Logger

    /// Records replayed between checkpoints (flush, then cursors committed).
    package var checkpointInterval = 1_000

    /// `groupID` of the consumer configuration names the cursors' groups (`<groupID>.<reason>`);
    /// replay reads without joining a group.
    package init(
        consumerConfiguration: KafkaConsumerConfiguration, producerConfiguration: KafkaProducerConfiguration,
        logger: Logger = Logger(label: "apns-worker.replay")
    ) {
        self.consumerConfiguration = consumerConfiguration
        self.producerConfiguration = producerConfiguration
        self.logger = logger
    }

    /// Replay with the worker's Kafka settings from its configuration (brokers, security, client
    /// properties); the cursors are named after its group, `<consumer.group>-replay.<reason>`.
    package init(configuration: WorkerConfiguration, logger: Logger = Logger(label: "apns-worker.replay")) {
        var consumer = configuration.kafkaConsumerConfiguration
        consumer.groupID = Self.cursorPrefix(configuration.consumer.group)
        self.init(
            consumerConfiguration: consumer, producerConfiguration: configuration.kafkaProducerConfiguration,
            logger: logger)
    }

    /// Replay with brokers alone. The cursors are the worker's default group's, so that a run from
    /// a configuration file that keeps the default group resumes where this one stopped, and back.
    package init(bootstrapServers: String, logger: Logger = Logger(label: "apns-worker.replay")) {
        self.init(
            consumerConfiguration: KafkaConsumerConfiguration(
                bootstrapServers: bootstrapServers, groupID: Self.cursorPrefix(ConsumerSettings.defaultGroup)),
            producerConfiguration: KafkaProducerConfiguration(bootstrapServers: bootstrapServers), logger: logger)
    }

    /// The group whose committed offsets are `reason`'s cursor.
    package func cursorGroup(_ reason: DeadLetterReason) -> String {
        Self.cursorGroup(consumerConfiguration.groupID, reason)
    }

    /// The prefix of the cursors' groups for a worker's consumer group.
    static func cursorPrefix(_ workerGroup: String) -> String { workerGroup + "-replay" }

    package struct ReplayError: Error, CustomStringConvertible {
        package let description: String
        /// The request cannot be carried out as given (a topic that does not exist): nothing was replayed.
        package var isUsageError = false
    }

    package func run(_ request: ReplayRequest) async throws -> ReplayReport {
        let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        var cursors: [DeadLetterReason: KafkaConsumer] = [:]
        do {
            // A topic that does not exist is a mistake, not an empty replay (and asking for its
            // partitions would create it on a broker that creates topics on first use).
            let topics = try await consumer.topicNames()
            for topic in [request.deadLetterTopic] + (request.targetTopic.map { [$0] } ?? [])
            where !topics.contains(topic) {
                throw ReplayError(description: "topic '\(topic)' does not exist", isUsageError: true)
            }
            for reason in request.effectiveReasons {
                var configuration = consumerConfiguration
                configuration.groupID = Self.cursorGroup(consumerConfiguration.groupID, reason)
                cursors[reason] = try KafkaConsumer(configuration: configuration, logger: logger)
            }
            let report: ReplayReport
            do {
                report = try await replay(request, from: consumer, cursors: cursors)
            } catch let error as ReplayError {
                throw error
            } catch {
                // Once it has started, Kafka's refusal (a cursor it will not store, a flush that
                // timed out) stops the run part-way: the next run resumes at its last checkpoint.
                throw ReplayError(description: "stopped part-way: \(error)")
            }
            for opened in [consumer] + cursors.values { await opened.close() }
            return report
        } catch {
            for opened in [consumer] + cursors.values { await opened.close() }
            throw error
        }
    }

    /// The consumer group holding `reason`'s cursor.
    package static func cursorGroup(_ groupID: String, _ reason: DeadLetterReason) -> String {
        "\(groupID).\(reason.rawValue)"
    }

    private func replay(
        _ request: ReplayRequest, from consumer: KafkaConsumer, cursors: [DeadLetterReason: KafkaConsumer]
    ) async throws -> ReplayReport {
        // Where each partition ends now: the run stops there. Some brokers' ListOffsets answer lags the
        // log (Tansu 0.6 names the start of the last record batch), so the end a partition's first
        // fetch response reports, moments later, raises it (see below).
        var ends: [KafkaTopicPartition: Int64] = [:]
        var lows: [KafkaTopicPartition: Int64] = [:]
        for id in try await consumer.partitions(of: request.deadLetterTopic) {
            let partition = KafkaTopicPartition(topic: request.deadLetterTopic, partition: id)
            let marks = try await consumer.watermarks(of: partition)
            if marks.high > marks.low {
                ends[partition] = marks.high
                lows[partition] = marks.low
            }
        }
        guard !ends.isEmpty else { return ReplayReport() }
        // Each reason's cursor per partition (where its earlier runs stopped); the run starts at the
        // lowest cursor of the reasons it replays.
        var cursor: [DeadLetterReason: [KafkaTopicPartition: Int64]] = [:]
        if !request.fromBeginning {
            for (reason, group) in cursors {
                let committed = try await group.committedOffsets(for: Array(ends.keys))
                cursor[reason] = committed.compactMapValues { $0 }
            }
        }
        var start: [KafkaTopicPartitionOffset] = []
        for (partition, end) in ends {
            let low = lows[partition]!
            let first = max(
                low, request.effectiveReasons.map { cursor[$0]?[partition] ?? low }.min() ?? low)
            if first < end {
                start.append(KafkaTopicPartitionOffset(partition, offset: first))
            } else {
                ends[partition] = nil
            }
        }
        guard !start.isEmpty else { return ReplayReport() }
        try consumer.assign(start)
        let frozenCursor = cursor
        let checkpointInterval = self.checkpointInterval
        let deliveryTimeout = producerConfiguration.deliveryTimeout

        let producer = request.dryRun ? nil : try KafkaProducer(configuration: producerConfiguration, logger: logger)
        let lastProgress = NIOLockedValueBox(ContinuousClock.now)
        let stallTimeout = self.stallTimeout
        let failures = NIOLockedValueBox<[String]>([])

        // Flushes what was produced, then moves every replayed reason's cursor up to `position`
        // (never back: another reason's lower cursor may have started the run earlier).
        @Sendable func checkpoint(_ position: [KafkaTopicPartition: Int64]) async throws {
            guard !request.dryRun, !position.isEmpty else { return }
            if let producer { try await producer.flush(timeout: deliveryTimeout) }
            let failed = failures.withLockedValue { $0 }
            guard failed.isEmpty else {
                throw ReplayError(
                    description:
                        "\(failed.count) replayed record(s) were not stored: \(failed.prefix(3).joined(separator: "; "))"
                )
            }
            for (reason, group) in cursors {
                let offsets = position.compactMap { partition, next -> KafkaTopicPartitionOffset? in
                    if let old = frozenCursor[reason]?[partition], old >= next { return nil }
                    return KafkaTopicPartitionOffset(partition, offset: next)
                }
                try await group.commit(offsets)
            }
        }

        let report = try await withThrowingTaskGroup(of: ReplayReport?.self) { group in
            group.addTask { [ends] in
                var report = ReplayReport()
                var remaining = ends
                var position: [KafkaTopicPartition: Int64] = [:]
                var sinceCheckpoint = 0
                var checked: Set<KafkaTopicPartition> = []
                for try await record in consumer.messages {
                    lastProgress.withLockedValue { $0 = .now }
                    if checked.insert(record.topicPartition).inserted, let queried = remaining[record.topicPartition],
                        let fetched = consumer.fetchedHighWatermark(of: record.topicPartition), fetched > queried
                    {
                        remaining[record.topicPartition] = fetched
                    }
                    guard let end = remaining[record.topicPartition], record.offset < end else { continue }
                    if record.offset + 1 >= end { remaining[record.topicPartition] = nil }
                    report.scanned += 1
                    let reason = record.headers.lastString(DeadLetterHeader.reason).flatMap(DeadLetterReason.init)
                    let behind =
                        reason.flatMap { frozenCursor[$0]?[record.topicPartition] }.map { record.offset < $0 } ?? false
                    let (row, message) = ReplayDecision.decide(record, request: request, replayedBefore: behind)
                    if let message, let producer {
                        let origin = "\(record.topicPartition)@\(record.offset)"
                        try await producer.send(message) { result in
                            if case .failure(let error) = result {
                                failures.withLockedValue { $0.append("\(origin): \(error)") }
                            }
                        }
                    }
                    report.counts[row, default: 0] += 1
                    position[record.topicPartition] = record.offset + 1
                    if message != nil { sinceCheckpoint += 1 }
                    if sinceCheckpoint >= checkpointInterval {
                        try await checkpoint(position)
                        sinceCheckpoint = 0
                        lastProgress.withLockedValue { $0 = .now }  // a slow flush is not a stalled topic
                    }
                    if remaining.isEmpty { break }
                }
                try await checkpoint(position)
                return report
            }
            // A watchdog: a topic that stops delivering fails the run instead of hanging it.
            group.addTask {
                while true {
                    try await Task.sleep(for: .milliseconds(250))
                    if ContinuousClock.now - lastProgress.withLockedValue({ $0 }) > stallTimeout {
                        throw ReplayError(
                            description:
                                "no dead letter arrived for \(stallTimeout) before the end offsets seen at the start")
                    }
                }
            }
            defer { group.cancelAll() }
            return try await group.next()!!
        }
        if let producer { await producer.close() }
        return report
    }
}
