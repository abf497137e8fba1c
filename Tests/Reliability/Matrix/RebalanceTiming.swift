import APNsSimulator
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import TestPeers
import WorkerDemo

/// Rebalances as users see them (`reliability --rebalance-timing`): worker processes with an urgent
/// lane work through a bulk backlog while urgent events arrive at a steady 20 a second, and one
/// group change is made: a scale-out from two workers to three, a rolling deploy of two (a new
/// worker in, then the old one SIGTERMed, twice), or a rolling restart of three static members
/// (each SIGTERMed and started again under its `group.instance.id`). Measured from the topics, as
/// downstream sees it: for each input partition, the longest time without a new result while it
/// still had a backlog (a partition with no consumer, or with one that has not started on it yet),
/// in the change's window; the urgent events' latency from their send to their result; what was
/// pushed twice and lost.
package enum RebalanceTiming {
    package enum Move: String, CaseIterable, Sendable {
        case scaleOut = "scale-out 2 to 3"
        case rollingDeploy = "rolling deploy of 2"
        case staticRestart = "rolling restart of 3 static members"
    }

    package struct Figures: Sendable {
        package var move: Move
        package var broker: Broker
        package var groupProtocol: KafkaGroupProtocol
        /// Each input partition's longest gap between results in the window, in seconds.
        package var gaps: [String: Double] = [:]
        /// The same in the 10 s before the change: the gap a partition has anyway.
        package var baselineGaps: [String: Double] = [:]
        package var window: Duration = .zero
        /// Milliseconds from each urgent event sent in the window to its result read.
        package var urgentLatencies: [Double] = []
        package var pushedTwice = 0
        package var lost = 0
        package var failure: String?
    }

    static let urgentRate = 20.0
    /// Per worker: events in flight, and APNs's answer time (about 80 events a second a worker).
    static let maxInFlight = 6
    static let apnsLatency = FaultInjector.Latency.uniform(.milliseconds(50), .milliseconds(100))

    package static func measure(
        _ move: Move, broker: Broker, groupProtocol: KafkaGroupProtocol, logger: Logger
    ) async -> Figures {
        var figures = Figures(move: move, broker: broker, groupProtocol: groupProtocol)
        let rig: Rig
        do {
            // Six partitions in each topic, which two and three members divide evenly: the mock
            // cluster's next-generation range assignment gives a topic's remainder by each member's
            // place in the whole group, not among the topic's own members, so with the lanes'
            // members (each subscribed to one topic) an uneven split can leave a partition to no one
            // (seen: the urgent topic's second of two partitions, after a third worker joined).
            rig = try await Rig.start(
                broker: broker, partitions: 6, lanes: true, urgentPartitions: 6, groupProtocol: groupProtocol,
                logger: logger)
        } catch {
            figures.failure = "the rig did not start: \(error)"
            return figures
        }
        let sent = NIOLockedValueBox<[String: ContinuousClock.Instant]>([:])
        let pacing = NIOLockedValueBox(true)
        var pacer: Task<Void, any Error>?
        do {
            try await rig.produce(rig.mixedBatch(move == .scaleOut ? 14_000 : 16_000).records)
            rig.pace(apnsLatency)
            pacer = try urgentPacer(rig: rig, sent: sent, pacing: pacing, logger: logger)
            let count = move == .staticRestart ? 3 : 2
            // A fetch held at most 10 ms: the mock cluster holds an empty one for the whole
            // fetch.wait.max.ms (500 ms by default), which would hide the urgent lane's latency.
            func environment(_ index: Int) -> [String: String] {
                var environment = ["APNS_WORKER_KAFKA_FETCH_WAIT_MAX_MS": "10"]
                if move == .staticRestart { environment["APNS_WORKER_KAFKA_GROUP_INSTANCE_ID"] = "worker-\(index)" }
                return environment
            }
            var workers = try (0..<count).map {
                try rig.startProcess(maxInFlight: maxInFlight, environment: environment($0))
            }
            try await rig.waitForResults(500)
            // Settled before the baseline: every input partition that has had a result has had one in
            // the last 2 s (a classic group of four members, two a process, can take several joins to
            // get there).
            try await rig.waitUntil(120, "every input partition to have results") {
                let now = ContinuousClock.now
                var all: Set<String> = []
                var recent: Set<String> = []
                for (key, seen) in rig.results.snapshot.seen {
                    guard let slash = key.lastIndex(of: "/") else { continue }
                    all.insert(String(key[..<slash]))
                    if now - seen.first < .seconds(2) { recent.insert(String(key[..<slash])) }
                }
                return all.count >= 8 && recent == all
            }
            let baselineStart = ContinuousClock.now
            try await Task.sleep(for: .seconds(10))
            let start = ContinuousClock.now
            switch move {
            case .scaleOut:
                let mark = rig.simulator.observation.totalConnections
                workers.append(try rig.startProcess(maxInFlight: maxInFlight, environment: environment(2)))
                try await rig.waitUntil(90, "the third worker to push") {
                    await rig.pushes(onConnectionsAfter: mark) > 0
                }
            case .rollingDeploy:
                for index in 0..<count {
                    let mark = rig.simulator.observation.totalConnections
                    let new = try rig.startProcess(maxInFlight: maxInFlight, environment: environment(count + index))
                    try await rig.waitUntil(90, "new worker \(index + 1) to push") {
                        await rig.pushes(onConnectionsAfter: mark) > 0
                    }
                    try await stop(workers[index], rig: rig, "old worker \(index + 1)")
                    workers[index] = new
                }
            case .staticRestart:
                for index in 0..<count {
                    try await stop(workers[index], rig: rig, "worker \(index)")
                    let mark = rig.simulator.observation.totalConnections
                    workers[index] = try rig.startProcess(maxInFlight: maxInFlight, environment: environment(index))
                    try await rig.waitUntil(90, "worker \(index) back and pushing") {
                        await rig.pushes(onConnectionsAfter: mark) > 0
                    }
                }
            }
            try await Task.sleep(for: .seconds(10))
            let end = ContinuousClock.now
            figures.window = end - start
            pacing.withLockedValue { $0 = false }
            _ = await pacer?.result
            let results = rig.results.snapshot.seen
            figures.gaps = longestGaps(results, from: start, to: end)
            figures.baselineGaps = longestGaps(results, from: baselineStart, to: start)
            let times = sent.withLockedValue { $0 }
            figures.urgentLatencies = times.compactMap { key, at in
                guard at >= start, at <= end, let result = results[key] else { return nil }
                return Double((result.first - at).components.attoseconds) / 1e15
                    + Double((result.first - at).components.seconds) * 1000
            }.sorted()
        } catch {
            figures.failure = "\(error)"
        }
        pacing.withLockedValue { $0 = false }
        _ = await pacer?.result
        let measurement = await rig.settle(within: 240)
        await rig.shutdown()
        figures.pushedTwice = measurement.pushedTwice
        figures.lost = measurement.lost
        return figures
    }

    private static func stop(_ worker: BackgroundProgram, rig: Rig, _ what: String) async throws {
        worker.signal(SIGTERM)
        try await rig.waitUntil(30, "\(what) to exit") { !worker.isRunning }
        let status = worker.waitUntilExit()
        guard status == 0 else { throw ScenarioFailure("\(what): SIGTERM, exit \(status)") }
    }

    /// Urgent events at `urgentRate` a second while `pacing`, each one's send time kept by its input
    /// key (topic/partition/offset, from its delivery report).
    private static func urgentPacer(
        rig: Rig, sent: NIOLockedValueBox<[String: ContinuousClock.Instant]>, pacing: NIOLockedValueBox<Bool>,
        logger: Logger
    ) throws -> Task<Void, any Error> {
        var configuration = KafkaProducerConfiguration(bootstrapServers: rig.bootstrapServers)
        configuration.linger = .milliseconds(1)
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        let batch = rig.urgentBatch(4_000).records
        return Task {
            defer { Task { await producer.close() } }
            let start = ContinuousClock.now
            for (index, record) in batch.enumerated() where pacing.withLockedValue({ $0 }) {
                try await Task.sleep(until: start + .seconds(Double(index) / urgentRate))
                let at = ContinuousClock.now
                try await producer.send(record) { result in
                    guard case .success(let report) = result else { return }
                    sent.withLockedValue { $0["\(record.topic)/\(report.partition)/\(report.offset)"] = at }
                }
            }
            try await producer.flush(timeout: .seconds(30))
        }
    }

    /// Each input partition's longest time between consecutive first results within the window,
    /// counting the window's edges as results: a partition with no result in the window shows the
    /// whole window.
    static func longestGaps(
        _ results: [String: TopicWatcher.Seen], from start: ContinuousClock.Instant, to end: ContinuousClock.Instant
    ) -> [String: Double] {
        var byPartition: [String: [ContinuousClock.Instant]] = [:]
        for (key, seen) in results {
            guard let slash = key.lastIndex(of: "/") else { continue }
            byPartition[String(key[..<slash]), default: []].append(seen.first)
        }
        return byPartition.mapValues { arrivals in
            let inside = ([start] + arrivals.filter { $0 > start && $0 < end } + [end]).sorted()
            return zip(inside, inside.dropFirst()).map { seconds($1 - $0) }.max() ?? seconds(end - start)
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// One line of the table: the partitions' longest gaps (median and worst, against the baseline's
    /// worst), the urgent p50 and p99, pushed twice, lost.
    package static func line(_ figures: Figures) -> String {
        func format(_ value: Double?) -> String { value.map { String(format: "%.2f s", $0) } ?? "-" }
        let gaps = figures.gaps.values.sorted()
        let median = gaps.isEmpty ? nil : gaps[gaps.count / 2]
        // Results are read by a consumer whose fetch the mock cluster holds up to 500 ms: gaps come in
        // half seconds, and an urgent partition (about 3 events a second) has 1 s ones anyway.
        let stopped = gaps.filter { $0 > 2 }.count
        let latencies = figures.urgentLatencies
        func percentile(_ p: Double) -> String {
            guard !latencies.isEmpty else { return "-" }
            return String(format: "%.0f ms", latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))])
        }
        var text =
            "| \(figures.move.rawValue) | \(figures.broker), \(figures.groupProtocol) | \(format(median)) | "
            + "\(format(gaps.last)) | \(stopped) of \(gaps.count) | \(format(figures.baselineGaps.values.max())) | "
            + "\(percentile(0.5)) | \(percentile(0.99)) | \(latencies.count) | \(figures.pushedTwice) | \(figures.lost) |"
        if let failure = figures.failure { text += " FAILED: \(failure)" }
        return text
    }

    /// Each partition's longest gap in the change's window and in the baseline window, for the log.
    package static func detail(_ figures: Figures) -> String {
        figures.gaps.keys.sorted().map { partition in
            String(
                format: "%@ %.2f s (before %.2f s)", partition, figures.gaps[partition] ?? 0,
                figures.baselineGaps[partition] ?? 0)
        }.joined(separator: "; ")
    }

    package static let header =
        "| change | broker, protocol | longest gap per partition, median | worst | partitions stopped > 2 s "
        + "| worst gap in the 10 s before | urgent p50 | urgent p99 | urgent events | pushed twice | lost |\n"
        + "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
}
