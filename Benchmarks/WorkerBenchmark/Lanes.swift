import Foundation
import Kafka
import Logging
import Synchronization

/// One run of the lanes scenario (`LanesScenario.swift`): a bulk backlog already in the broker, the
/// worker started into it, and while it drains, urgent events produced on a fixed schedule (rate R:
/// event i at start + i/R), open loop as in `OpenLoop`: each urgent event's latency runs from its
/// scheduled time, not its send, to a downstream consumer of the results topic reading its result,
/// so a stall cannot hide its own queue.
enum Lanes {
    static let bulkTopic = "bulk"
    static let urgentTopic = "urgent"
    /// Urgent event i goes to the device token of event `urgentTokens + i`: none of the backlog's.
    static let urgentTokens = 100_000_000

    /// How the worker meets the urgent events.
    enum Variant: String, CaseIterable, Sendable {
        /// Both topics in `consumer.topics` and no urgent traffic: the bulk drain's reference.
        case reference = "no-urgent"
        /// Both topics in `consumer.topics`: one group member, one buffer, one in-flight bound.
        case without = "without-lanes"
        /// `urgent` in `consumer.lanes.urgent.topics`.
        case with = "with-lanes"

        var lanes: Bool { self == .with }
        var urgentTraffic: Bool { self != .reference }
        var label: String {
            switch self {
            case .reference: "no urgent traffic"
            case .without: "without lanes"
            case .with: "with lanes"
            }
        }
    }

    struct Run: Sendable {
        var bulkResults = 0
        var bulkFirst: ContinuousClock.Instant?
        var bulkLast: ContinuousClock.Instant?
        var urgentSent = 0
        var urgentResults = 0
        /// Milliseconds from each urgent event's scheduled time to its result read, and the same in
        /// three parts, as `OpenLoop.Step` splits them: in (to the worker's decode), work (the result's
        /// `latencyMs`: decode and the APNs round trip) and out (its `completedAt` to the reader).
        var latencies: [Double] = []
        /// Each latency's urgent event, by its place in the schedule (the latencies are in the order
        /// their results were read).
        var indices: [Int] = []
        var inbound: [Double] = []
        var work: [Double] = []
        var outbound: [Double] = []
        /// Milliseconds from each urgent event's scheduled time to the broker acknowledging it (the
        /// load generator's and the broker's share of "in": the worker fetches it after that).
        var acknowledged: [Double] = []
        /// The bulk results' `latencyMs`: what the urgent ones' work is to be compared with.
        var bulkWork: [Double] = []
        /// How busy the machine's cores were from the first bulk result to the last (0 to 1, every
        /// process: the peers, this driver, the worker and whatever else the machine runs).
        var machineBusy = 0.0
        var workerCPUSeconds = 0.0
        var workerPeakRSSKiB = 0
        var peersCPUSeconds = 0.0

        /// From the first bulk result read to the last.
        var drainSeconds: Double {
            guard let bulkFirst, let bulkLast else { return 0 }
            return seconds(bulkLast - bulkFirst)
        }
        var bulkRate: Double { drainSeconds > 0 ? Double(max(bulkResults - 1, 0)) / drainSeconds : 0 }

        /// The latencies in the order the urgent events were scheduled.
        var latenciesBySchedule: [Double] { zip(indices, latencies).sorted { $0.0 < $1.0 }.map(\.1) }

        func percentile(_ p: Double, of values: KeyPath<Run, [Double]> = \.latencies) -> Double? {
            self[keyPath: values].percentile(p)
        }
    }

    /// Drains `backlog` bulk events with a worker `startWorker` starts, sending urgent events at
    /// `rate` per second (none at 0) from the first bulk result until the last.
    static func run(
        backlog: Int, rate: Double, bootstrap: String, resultsTopic: String, timeout: Duration, logger: Logger,
        isolation: isolated (any Actor)? = #isolation, startWorker: () throws -> Void
    ) async throws -> Run {
        var readerConfiguration = KafkaConsumerConfiguration(
            bootstrapServers: bootstrap, groupID: "bench-reader-\(resultsTopic)")
        readerConfiguration.sessionTimeout = .seconds(10)
        // A downstream consumer that wants its results early (see `OpenLoop`).
        readerConfiguration.properties = ["fetch.wait.max.ms": "5"]
        let reader = try KafkaConsumer(configuration: readerConfiguration, logger: logger)
        if Peers.broker == .mock { try await checkBacklog(backlog, reader: reader) }
        let partitions = try await reader.partitions(of: resultsTopic)
        try reader.assign(
            partitions.map {
                KafkaTopicPartitionOffset(topic: resultsTopic, partition: $0, offset: KafkaOffset.beginning)
            })

        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: bootstrap)
        producerConfiguration.linger = .milliseconds(1)  // an upstream service that sends at once
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
        // Warm: the urgent topic's metadata (else librdkafka asks when its first record arrives, and
        // that record waits for the answer), the producer's connection and its idempotent producer id
        // (through the input topic no worker here reads), all before the first urgent event.
        producer.prepare(topics: [urgentTopic])
        try await producer.send(KafkaProducerMessage(topic: Peers.inputTopic, key: nil, value: Backlog.event(0))) { _ in
        }
        try await producer.flush(timeout: .seconds(30))

        let urgentStart = Mutex<ContinuousClock.Instant?>(nil)
        let acknowledged = Mutex<[Double]>([])
        let figures = Mutex(Run())
        // Detached: the reader gets its own thread's time, not the sending loop's actor. It reads
        // every bulk result too (scanning bytes only), so the urgent results' way out includes
        // whatever wait this reader adds behind them: the "out" part shows it.
        let reading = Task.detached {
            do {
                for try await record in reader.messages {
                    let now = ContinuousClock.now
                    guard let value = record.value, let id = eventID(in: value) else { continue }
                    guard let index = id else {
                        let work = number(after: latencyField, in: value)
                        figures.withLock { run in
                            if run.bulkFirst == nil { run.bulkFirst = now }
                            run.bulkLast = now
                            run.bulkResults += 1
                            if let work { run.bulkWork.append(work) }
                        }
                        continue
                    }
                    guard let start = urgentStart.withLock({ $0 }) else { continue }
                    let total = OpenLoop.milliseconds(now - (start + .seconds(Double(index) / rate)))
                    let parts = latencyParts(total: total, result: value)
                    figures.withLock { run in
                        run.urgentResults += 1
                        run.latencies.append(total)
                        run.indices.append(index)
                        if let parts {
                            run.work.append(parts.work)
                            run.outbound.append(parts.outbound)
                            run.inbound.append(parts.inbound)
                        }
                    }
                }
            } catch {
                logger.error("reading \(resultsTopic) stopped: \(error)")
            }
        }
        defer { reading.cancel() }

        try startWorker()
        let deadline = ContinuousClock.now + timeout
        // The first bulk result: the worker has joined its group and connected to APNs.
        while figures.withLock({ $0.bulkFirst == nil }) {
            guard ContinuousClock.now < deadline else { throw BenchmarkFailure("no bulk result within \(timeout)") }
            try await Task.sleep(for: .milliseconds(5))
        }
        let ticksBefore = OpenLoop.machineTicks()
        var sent = 0
        let start = ContinuousClock.now + .milliseconds(20)
        urgentStart.withLock { $0 = start }
        while figures.withLock({ $0.bulkResults }) < backlog, ContinuousClock.now < deadline {
            guard rate > 0 else {
                try await Task.sleep(for: .milliseconds(20))
                continue
            }
            // Send every urgent event whose time has come, then sleep to the next one's.
            let now = ContinuousClock.now
            while start + .seconds(Double(sent) / rate) <= now {
                let scheduled = start + .seconds(Double(sent) / rate)
                try await producer.send(
                    KafkaProducerMessage(
                        topic: urgentTopic, key: nil, value: Backlog.event(urgentTokens + sent, id: "urgent-\(sent)"))
                ) { result in
                    guard case .success = result else { return }
                    let milliseconds = OpenLoop.milliseconds(ContinuousClock.now - scheduled)
                    acknowledged.withLock { $0.append(milliseconds) }
                }
                sent += 1
            }
            try await Task.sleep(until: start + .seconds(Double(sent) / rate))
        }
        let ticksAfter = OpenLoop.machineTicks()
        // The urgent results still on their way.
        let settle = ContinuousClock.now + .seconds(30)
        while figures.withLock({ $0.urgentResults }) < sent, ContinuousClock.now < settle {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await producer.flush(timeout: .seconds(30))
        await producer.close()
        reading.cancel()
        await reader.close()
        var run = figures.withLock { $0 }
        run.urgentSent = sent
        run.acknowledged = acknowledged.withLock { $0 }
        run.machineBusy =
            Double(ticksAfter.busy - ticksBefore.busy) / Double(max(ticksAfter.total - ticksBefore.total, 1))
        return run
    }

    /// The mock cluster keeps at most 5 MiB of record batches per partition and drops the oldest
    /// beyond that: a backlog that does not fit would never drain.
    private static func checkBacklog(_ backlog: Int, reader: KafkaConsumer) async throws {
        var kept = 0
        for partition in try await reader.partitions(of: bulkTopic) {
            let marks = try await reader.watermarks(of: KafkaTopicPartition(topic: bulkTopic, partition: partition))
            kept += Int(marks.high - marks.low)
        }
        guard kept == backlog else {
            throw BenchmarkFailure(
                "the mock cluster kept \(kept) of the \(backlog) backlog events (5 MiB per partition): "
                    + "more WORKER_BENCH_BULK_PARTITIONS")
        }
    }

    private static let idField = Array(#""eventId":""#.utf8)
    private static let urgentPrefix = Array("urgent-".utf8)
    private static let bulkPrefix = Array("bench-".utf8)

    /// `.some(nil)` for a bulk event's result (`bench-INDEX`), `.some(index)` for an urgent one's
    /// (`urgent-INDEX`), nil for anything else.
    private static func eventID(in value: [UInt8]) -> Int?? {
        guard let at = find(idField, in: value) else { return nil }
        let start = at + idField.count
        func hasPrefix(_ prefix: [UInt8]) -> Bool {
            value.count >= start + prefix.count && value[start..<start + prefix.count].elementsEqual(prefix)
        }
        if hasPrefix(bulkPrefix) { return .some(nil) }
        guard hasPrefix(urgentPrefix) else { return nil }
        var index = 0
        var cursor = start + urgentPrefix.count
        while cursor < value.count, value[cursor] >= UInt8(ascii: "0"), value[cursor] <= UInt8(ascii: "9") {
            index = index * 10 + Int(value[cursor] - UInt8(ascii: "0"))
            cursor += 1
        }
        return .some(index)
    }
}
