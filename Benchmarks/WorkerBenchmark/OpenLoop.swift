import Foundation
import Kafka
import Logging
import Synchronization

/// Latency against offered load, open loop: events are produced on a fixed schedule (rate R: event i
/// at start + i/R) whatever the worker does, and each event's latency runs from its scheduled time to
/// the moment a downstream consumer of the results topic has its result. Measuring from the
/// schedule, not from the produce call, keeps a stall from hiding its own queue (no coordinated
/// omission). librdkafka stamps a record's CreateTime in the produce call, so the start is the input
/// record's timestamp whenever the producer keeps up.
///
/// One worker serves every rate of a run (the group join is paid once), rates ascending, each for
/// `seconds`, with a pause for the worker to drain between them. `startWorker` returns the worker's
/// operations port, if it has one: its event-duration histogram is scraped before and after each step.
enum OpenLoop {
    struct Step: Sendable {
        var rate: Double
        var sent = 0
        var results = 0
        var delivered = 0
        /// Milliseconds from each event's scheduled time to its result read.
        var latencies: [Double] = []
        /// The same, in three parts: in (scheduled time to the worker decoding the event: the input
        /// producer, the broker, the worker's fetch and hand-over), work (decode to result built: the
        /// result's `latencyMs`, mostly the APNs round trip) and out (result built, its `completedAt`,
        /// to this reader: the worker's producer, the broker, the reader's fetch). `completedAt` has
        /// millisecond resolution.
        var inbound: [Double] = []
        var work: [Double] = []
        var outbound: [Double] = []
        /// The rate the producer achieved (events over the step's send time).
        var sentRate: Double = 0
        /// How busy the machine's cores were while the step's events were sent (0 to 1, all
        /// processes: broker, simulator, this driver and the worker share them).
        var machineBusy: Double = 0
        /// The worker's own share of the step's events, from its `/metrics` (`WorkerShare`): nil when
        /// the scenario gave no port or a scrape failed.
        var workerShare: WorkerShare?

        func percentile(_ p: Double, of values: KeyPath<Step, [Double]> = \.latencies) -> Double {
            self[keyPath: values].percentile(p) ?? .nan
        }
    }

    /// What the reader needs to turn a result's id into a latency: each step's start and rate.
    private struct Schedule: Sendable {
        var starts: [ContinuousClock.Instant] = []
        var rates: [Double] = []
    }

    static func run(
        rates: [Double], seconds: Double, bootstrap: String, resultsTopic: String, logger: Logger,
        isolation: isolated (any Actor)? = #isolation, startWorker: () throws -> Int?
    ) async throws -> [Step] {
        var readerConfiguration = KafkaConsumerConfiguration(
            bootstrapServers: bootstrap, groupID: "bench-reader-\(resultsTopic)")
        readerConfiguration.sessionTimeout = .seconds(10)
        // A downstream consumer that wants its results early: the mock cluster holds a fetch that finds
        // nothing for the whole fetch.wait.max.ms (500 ms by default) even when data arrives meanwhile.
        readerConfiguration.properties = ["fetch.wait.max.ms": "5"]
        let reader = try KafkaConsumer(configuration: readerConfiguration, logger: logger)
        let partitions = try await reader.partitions(of: resultsTopic)
        try reader.assign(
            partitions.map {
                KafkaTopicPartitionOffset(topic: resultsTopic, partition: $0, offset: KafkaOffset.beginning)
            })

        var producerConfiguration = KafkaProducerConfiguration(bootstrapServers: bootstrap)
        producerConfiguration.linger = .milliseconds(1)  // an upstream service that sends at once
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)

        let schedule = Mutex(Schedule())
        let steps = Mutex(rates.map { Step(rate: $0) })
        let warmedUp = Atomic<Bool>(false)
        // Detached: the reader gets its own thread's time, not the producer loop's actor.
        let reading = Task.detached {
            do {
                for try await record in reader.messages {
                    let now = ContinuousClock.now
                    guard let value = record.value, let id = eventID(in: value) else { continue }
                    if id.step < 0 {
                        warmedUp.store(true, ordering: .relaxed)
                        continue
                    }
                    let scheduled = schedule.withLock { schedule -> ContinuousClock.Instant? in
                        guard id.step < schedule.starts.count else { return nil }
                        return schedule.starts[id.step] + .seconds(Double(id.index) / schedule.rates[id.step])
                    }
                    guard let scheduled else { continue }
                    let delivered = contains(deliveredField, in: value)
                    let total = milliseconds(now - scheduled)
                    let parts = latencyParts(total: total, result: value)
                    steps.withLock { steps in
                        steps[id.step].results += 1
                        if delivered { steps[id.step].delivered += 1 }
                        steps[id.step].latencies.append(total)
                        if let parts {
                            steps[id.step].work.append(parts.work)
                            steps[id.step].outbound.append(parts.outbound)
                            steps[id.step].inbound.append(parts.inbound)
                        }
                    }
                }
            } catch {
                logger.error("reading \(resultsTopic) stopped: \(error)")
            }
        }
        defer { reading.cancel() }

        let operationsPort = try startWorker()
        // Warm-up: one event every 100 ms until a result comes back (the worker has joined the group
        // and connected to APNs), then a second more.
        let warmUpDeadline = ContinuousClock.now + .seconds(90)
        var warmUpIndex = 0
        while !warmedUp.load(ordering: .relaxed) {
            guard ContinuousClock.now < warmUpDeadline else {
                throw BenchmarkFailure("no result for a warm-up event within 90 s")
            }
            try await producer.send(
                KafkaProducerMessage(
                    topic: Peers.inputTopic, key: nil, value: Backlog.event(warmUpIndex, id: "warm-\(warmUpIndex)")
                )
            ) { _ in }
            warmUpIndex += 1
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(1))

        for (step, rate) in rates.enumerated() {
            let count = max(1, Int(rate * seconds))
            let start = ContinuousClock.now + .milliseconds(50)
            schedule.withLock {
                $0.starts.append(start)
                $0.rates.append(rate)
            }
            let interval = 1.0 / rate
            let shareBefore = operationsPort.flatMap { WorkerShare.scrape(port: $0) }
            let ticksBefore = machineTicks()
            var index = 0
            while index < count {
                // Send every event whose time has come, then sleep to the next one's.
                let now = ContinuousClock.now
                while index < count, start + .seconds(Double(index) * interval) <= now {
                    try await producer.send(
                        KafkaProducerMessage(
                            topic: Peers.inputTopic, key: nil,
                            value: Backlog.event(index, id: "load-\(step)-\(index)"))
                    ) { _ in }
                    index += 1
                }
                if index < count { try await Task.sleep(until: start + .seconds(Double(index) * interval)) }
            }
            let sendTime = ContinuousClock.now - start
            let ticksAfter = machineTicks()
            let busy = Double(ticksAfter.busy - ticksBefore.busy) / Double(max(ticksAfter.total - ticksBefore.total, 1))
            steps.withLock {
                $0[step].machineBusy = busy
                $0[step].sent = count
                $0[step].sentRate = Double(count) / max(milliseconds(sendTime) / 1000, 1e-9)
            }
            // Wait for the step's results (or give up after a generous while), then let the worker rest.
            let deadline = ContinuousClock.now + .seconds(max(30, seconds * 3))
            while steps.withLock({ $0[step].results }) < count, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .seconds(1))
            // After the rest: every result the reader has is acknowledged by now, and recorded.
            if let shareBefore, let shareAfter = operationsPort.flatMap({ WorkerShare.scrape(port: $0) }) {
                steps.withLock { $0[step].workerShare = shareAfter.since(shareBefore) }
            }
        }
        try await producer.flush(timeout: .seconds(30))
        await producer.close()
        reading.cancel()
        await reader.close()
        return steps.withLock { $0 }
    }

    /// The machine's CPU ticks from /proc/stat: all, and all but idle and iowait.
    static func machineTicks() -> (busy: Int, total: Int) {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
        else { return (0, 0) }
        let ticks = line.split(separator: " ").dropFirst().compactMap { Int($0) }
        guard ticks.count >= 5 else { return (0, 0) }
        let total = ticks.reduce(0, +)
        return (total - ticks[3] - ticks[4], total)
    }

    static func milliseconds(_ duration: Duration) -> Double { seconds(duration) * 1000 }

    private static let idField = Array(#""eventId":""#.utf8)

    /// The step and index of a result's event id (`load-STEP-INDEX`); step -1 for a warm-up event.
    private static func eventID(in value: [UInt8]) -> (step: Int, index: Int)? {
        guard let at = find(idField, in: value) else { return nil }
        var cursor = at + idField.count
        func word() -> Substring {
            var end = cursor
            while end < value.count, value[end] != UInt8(ascii: "-"), value[end] != UInt8(ascii: "\"") { end += 1 }
            defer { cursor = end + 1 }
            return Substring(String(decoding: value[cursor..<end], as: UTF8.self))
        }
        switch word() {
        case "warm": return (-1, 0)
        case "load":
            guard let step = Int(word()), let index = Int(word()) else { return nil }
            return (step, index)
        default: return nil
        }
    }
}
