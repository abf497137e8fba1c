import Threading
import Foundation
import Kafka
import Logging

/// Puts dead letters back: reads a dead-letter topic up to the end offsets it saw when it started
/// (records dead-lettered during the run wait for the next run), applies the request's filters, and
/// re-produces each chosen record with an idempotent producer.
///
/// It remembers: each reason has a cursor in a consumer group of its own (`<groupID>.<reason>`): the
/// committed offset is the reason's lowest dead letter no run has replayed, and the commit metadata
/// names what was replayed above it (`ReplayCursor`). Cursors are stored at every checkpoint, after
/// the records before it are stored. So running the same replay twice replays once; a run that
/// filters leaves what it filtered for a later run; and a run that fails part-way resumes where its
/// last checkpoint was (records after it may be produced again: at least once). `fromBeginning`
/// ignores what earlier runs did. A run reserves its reasons' cursors while it runs, and a second run
/// over any of them is refused (`ReplayCursorStore`).
package struct DeadLetterReplayer: Sendable {
    package var consumerConfiguration: KafkaConsumerConfiguration
    package var producerConfiguration: KafkaProducerConfiguration
    /// A run that receives nothing for this long, with dead letters still to read, fails.
    package var stallTimeout: Duration = .seconds(30)
    package var logger: Logger

    /// Records replayed between checkpoints (flush, then cursors committed).
    package var checkpointInterval = 1_000
    /// A checkpoint at least this often, to renew the run's reservation of its cursors.
    package var checkpointPeriod: Duration = .seconds(5)
    /// How long a run's reservation of its cursors lasts unless renewed: what a run that died blocks.
    package var reservationDuration: Duration = .seconds(60)
    /// The least a run waits after writing its reservation before it reads it back (longer when Kafka is
    /// slower), and the longest its store may take for a refused run to give the reservation up at once
    /// (see `ReplayCursorStore`). Not a setting: every run must wait the same.
    package var reservationSettle: Duration = .seconds(1)
    /// Names this run in the reservations it writes: host, process and a random part.
    package var runID: String = DeadLetterReplayer.makeRunID()

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
        consumer.properties["group.instance.id"] = nil  // replay joins no group: the id is a worker's
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

    static func makeRunID() -> String {
        let host = ProcessInfo.processInfo.hostName.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        return "\(host.prefix(40)):\(ProcessInfo.processInfo.processIdentifier):\(UInt32.random(in: 0...UInt32.max))"
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
        var claims: [DeadLetterReason: KafkaConsumer] = [:]
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
                guard !request.dryRun else { continue }
                configuration.groupID = Self.claimGroup(consumerConfiguration.groupID, reason)
                claims[reason] = try KafkaConsumer(configuration: configuration, logger: logger)
            }
            let report: ReplayReport
            do {
                report = try await replay(request, from: consumer, cursors: cursors, claims: claims)
            } catch let error as ReplayError {
                throw error
            } catch {
                // Once it has started, Kafka's refusal (a cursor it will not store, a flush that
                // timed out) stops the run part-way: the next run resumes at its last checkpoint.
                throw ReplayError(description: "stopped part-way: \(error)")
            }
            for opened in [consumer] + cursors.values + claims.values { await opened.close() }
            return report
        } catch {
            for opened in [consumer] + cursors.values + claims.values { await opened.close() }
            throw error
        }
    }

    /// The consumer group holding `reason`'s cursor.
    package static func cursorGroup(_ groupID: String, _ reason: DeadLetterReason) -> String {
        "\(groupID).\(reason.rawValue)"
    }

    /// The consumer group in whose commit metadata a run writes its id when it reserves
    /// `reason`'s cursor (see `ReplayCursorStore`).
    package static func claimGroup(_ groupID: String, _ reason: DeadLetterReason) -> String {
        cursorGroup(groupID, reason) + ".claim"
    }

    private func replay(
        _ request: ReplayRequest, from consumer: KafkaConsumer, cursors groups: [DeadLetterReason: KafkaConsumer],
        claims: [DeadLetterReason: KafkaConsumer]
    ) async throws -> ReplayReport {
        // Where each partition ends now: the run stops there. Some brokers' ListOffsets answer lags the
        // log (Tansu 0.6 names the start of the last record batch), so the end a partition's first
        // fetch response reports, moments later, raises it (see below).
        var ends: [KafkaTopicPartition: Int64] = [:]
        var lows: [KafkaTopicPartition: Int64] = [:]
        for id in try await consumer.partitions(of: request.deadLetterTopic) {
            let partition = KafkaTopicPartition(topic: request.deadLetterTopic, partition: id)
            let marks = try await consumer.watermarks(of: partition)
            lows[partition] = marks.low
            if marks.high > marks.low { ends[partition] = marks.high }
        }
        let partitions = lows.keys.sorted()
        var report = ReplayReport()
        // Each reason's cursor per partition: where earlier runs left it, and (unless this is a dry
        // run) reserved by this run until it ends.
        let store = ReplayCursorStore(
            holder: runID, groups: groups, claims: claims, partitions: partitions, lows: lows,
            duration: reservationDuration, settle: reservationSettle, logger: logger)
        let start = request.dryRun ? try await store.read() : try await store.acquire()
        report.notes += start.notes
        do {
            return try await replay(
                request, from: consumer, cursors: start.cursors, ends: ends, lows: lows, store: store, report: report)
        } catch {
            if !request.dryRun { await store.abandon() }
            throw error
        }
    }

    private func replay(
        _ request: ReplayRequest, from consumer: KafkaConsumer, cursors: ReplayCursorStore.Cursors,
        ends: [KafkaTopicPartition: Int64], lows: [KafkaTopicPartition: Int64], store: ReplayCursorStore,
        report: ReplayReport
    ) async throws -> ReplayReport {
        var cursors = cursors
        var ends = ends
        var report = report
        guard !ends.isEmpty else {
            if !request.dryRun { try await store.giveUp(cursors) }
            return report
        }
        var start: [KafkaTopicPartitionOffset] = []
        for (partition, end) in ends {
            var first = request.effectiveReasons.map { reason -> Int64 in
                request.fromBeginning ? lows[partition]! : cursors[reason]![partition]!.low
            }.min()!
            first = max(first, lows[partition]!)
            if first < end {
                start.append(KafkaTopicPartitionOffset(partition, offset: first))
                for reason in request.effectiveReasons { cursors[reason]![partition]!.startScanning(at: first) }
            } else {
                ends[partition] = nil
            }
        }
        guard !start.isEmpty else {
            if !request.dryRun { try await store.giveUp(cursors) }
            return report
        }
        try consumer.assign(start)
        let checkpointInterval = self.checkpointInterval
        let checkpointPeriod = self.checkpointPeriod
        let reservationDuration = self.reservationDuration
        let deliveryTimeout = producerConfiguration.deliveryTimeout

        let producer = request.dryRun ? nil : try KafkaProducer(configuration: producerConfiguration, logger: logger)
        // When a dead letter last arrived, for the watchdog; nil while a checkpoint runs (its flush and
        // cursor stores are the run's own work, up to half the reservation, not the topic falling silent).
        let lastProgress = Locked<ContinuousClock.Instant?>(.now)
        let stallTimeout = self.stallTimeout
        let failures = Locked<[String]>([])

        // Flushes what was produced, then stores every replayed reason's cursor (renewing the
        // run's reservation of it, or giving it up with `givingUp`).
        @Sendable func checkpoint(_ cursors: [DeadLetterReason: [KafkaTopicPartition: ReplayCursor]], givingUp: Bool)
            async throws
        {
            guard !request.dryRun else { return }
            lastProgress.withLock { $0 = nil }
            defer { lastProgress.withLock { $0 = .now } }
            // Bounded well inside the reservation (`reservationDuration`): a checkpoint that cannot flush fails the
            // run part-way rather than outlive its reservation.
            if let producer { try await producer.flush(timeout: min(deliveryTimeout, reservationDuration / 2)) }
            let failed = failures.withLock { $0 }
            guard failed.isEmpty else {
                throw ReplayError(
                    description:
                        "\(failed.count) replayed record(s) were not stored: \(failed.prefix(3).joined(separator: "; "))"
                )
            }
            if givingUp { try await store.giveUp(cursors) } else { try await store.renew(cursors) }
        }

        let scan = try await withThrowingTaskGroup(of: ReplayReport?.self) { group in
            group.addTask { [ends, cursors] in
                var report = ReplayReport()
                var cursors = cursors
                var remaining = ends
                var sinceCheckpoint = 0
                var lastCheckpoint = ContinuousClock.now
                var checked: Set<KafkaTopicPartition> = []
                for try await record in consumer.messages {
                    lastProgress.withLock { $0 = .now }
                    let partition = record.topicPartition
                    if checked.insert(partition).inserted, let queried = remaining[partition],
                        let fetched = consumer.fetchedHighWatermark(of: partition), fetched > queried
                    {
                        remaining[partition] = fetched
                    }
                    guard let end = remaining[partition], record.offset < end else { continue }
                    if record.offset + 1 >= end { remaining[partition] = nil }
                    report.scanned += 1
                    let reason = record.headers.lastString(DeadLetterHeader.reason).flatMap(
                        DeadLetterReason.init(rawValue:))
                    let cursor = reason.flatMap { cursors[$0]?[partition] }
                    let before = !request.fromBeginning && (cursor?.isHandled(record.offset) ?? false)
                    let (row, message) = ReplayDecision.decide(record, request: request, replayedBefore: before)
                    if message != nil, producer != nil, !store.reservationLasts {
                        throw ReplayError(
                            description:
                                "this run's reservation of its cursors may have lapsed (its last checkpoint took most of \(reservationDuration)); stopped part-way before \(partition)@\(record.offset): run it again"
                        )
                    }
                    if let message, let producer {
                        let origin = "\(partition)@\(record.offset)"
                        try await producer.send(message) { result in
                            if case .failure(let error) = result {
                                failures.withLock { $0.append("\(origin): \(error)") }
                            }
                        }
                    }
                    report.counts[row, default: 0] += 1
                    if let replays = record.headers.lastString(DeadLetterHeader.replayCount).flatMap({ Int($0) }),
                        replays > 0
                    {
                        report.failedAgain[row, default: 0] += 1
                    }
                    // Every cursor of the run moves past this record; the record's own reason's
                    // only if it was replayed, now or before.
                    for other in cursors.keys {
                        let done = other != reason || message != nil || (cursor?.isHandled(record.offset) ?? false)
                        cursors[other]![partition]!.scanned(record.offset, done: done)
                    }
                    if message != nil { sinceCheckpoint += 1 }
                    if sinceCheckpoint >= checkpointInterval || ContinuousClock.now - lastCheckpoint >= checkpointPeriod
                    {
                        try await checkpoint(cursors, givingUp: false)
                        sinceCheckpoint = 0
                        lastCheckpoint = .now
                    }
                    if remaining.isEmpty { break }
                }
                try await checkpoint(cursors, givingUp: true)
                return report
            }
            // A watchdog: a topic that stops delivering fails the run instead of hanging it.
            group.addTask {
                while true {
                    try await Task.sleep(for: .milliseconds(250))
                    if let last = lastProgress.withLock({ $0 }), ContinuousClock.now - last > stallTimeout {
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
        report.scanned = scan.scanned
        report.counts = scan.counts
        report.failedAgain = scan.failedAgain
        return report
    }
}
