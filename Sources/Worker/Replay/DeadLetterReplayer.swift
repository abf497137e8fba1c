import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers

/// Puts dead letters back: reads a dead-letter topic from its beginning up to the end offsets it
/// saw when it started (records dead-lettered during the run wait for the next run), applies the
/// request's filters, and re-produces each chosen record with an idempotent producer. One run reads
/// each dead letter once, so a run never replays the same dead letter twice.
public struct DeadLetterReplayer: Sendable {
    public var consumerConfiguration: KafkaConsumerConfiguration
    public var producerConfiguration: KafkaProducerConfiguration
    /// A run that receives nothing for this long, with dead letters still to read, fails.
    public var stallTimeout: Duration = .seconds(30)
    public var logger: Logger

    /// `groupID` of the consumer configuration is only a name here: replay reads without joining a
    /// group and commits nothing, so every run sees the whole topic.
    public init(
        consumerConfiguration: KafkaConsumerConfiguration, producerConfiguration: KafkaProducerConfiguration,
        logger: Logger = Logger(label: "apns-worker.replay")
    ) {
        self.consumerConfiguration = consumerConfiguration
        self.producerConfiguration = producerConfiguration
        self.logger = logger
    }

    public struct ReplayError: Error, CustomStringConvertible {
        public let description: String
    }

    public func run(_ request: ReplayRequest) async throws -> ReplayReport {
        let consumer = try KafkaConsumer(configuration: consumerConfiguration, logger: logger)
        do {
            let report = try await replay(request, from: consumer)
            await consumer.close()
            return report
        } catch {
            await consumer.close()
            throw error
        }
    }

    private func replay(_ request: ReplayRequest, from consumer: KafkaConsumer) async throws -> ReplayReport {
        // Where each partition ends now: the run stops there. Some brokers' ListOffsets answer lags the
        // log (Tansu 0.6 names the start of the last record batch), so the end a partition's first
        // fetch response reports, moments later, raises it (see below).
        var ends: [KafkaTopicPartition: Int64] = [:]
        var start: [KafkaTopicPartitionOffset] = []
        for id in try await consumer.partitions(of: request.deadLetterTopic) {
            let partition = KafkaTopicPartition(topic: request.deadLetterTopic, partition: id)
            let marks = try await consumer.watermarks(of: partition)
            if marks.high > marks.low {
                ends[partition] = marks.high
                start.append(KafkaTopicPartitionOffset(partition, offset: marks.low))
            }
        }
        guard !ends.isEmpty else { return ReplayReport() }
        try consumer.assign(start)

        let producer = request.dryRun ? nil : try KafkaProducer(configuration: producerConfiguration, logger: logger)
        let lastProgress = NIOLockedValueBox(ContinuousClock.now)
        let stallTimeout = self.stallTimeout
        let failures = NIOLockedValueBox<[String]>([])

        let report = try await withThrowingTaskGroup(of: ReplayReport?.self) { group in
            group.addTask { [ends] in
                var report = ReplayReport()
                var remaining = ends
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
                    let (row, message) = ReplayDecision.decide(record, request: request)
                    if let message, let producer {
                        let origin = "\(record.topicPartition)@\(record.offset)"
                        try await producer.send(message) { result in
                            if case .failure(let error) = result {
                                failures.withLockedValue { $0.append("\(origin): \(error)") }
                            }
                        }
                    }
                    report.counts[row, default: 0] += 1
                    if remaining.isEmpty { break }
                }
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
        if let producer {
            try await producer.flush(timeout: producerConfiguration.deliveryTimeout)
            await producer.close()
        }
        let failed = failures.withLockedValue { $0 }
        guard failed.isEmpty else {
            throw ReplayError(
                description:
                    "\(failed.count) replayed record(s) were not stored: \(failed.prefix(3).joined(separator: "; "))")
        }
        return report
    }
}
