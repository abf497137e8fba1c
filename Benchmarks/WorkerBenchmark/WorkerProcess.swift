import APNs
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Worker
import WorkerTelemetry

/// What runs in the measured child process (`--worker MODE …`).
enum Mode: String, CaseIterable {
    /// The worker as `apns-worker run` assembles it, against the simulator.
    case worker
    /// The same pipeline (consume, decode, publish results, commit) with an APNs that answers 200 at
    /// once: the Kafka-side ceiling of the worker.
    case instant
}

/// `WORKER_BENCH_CONSUMER_PROPERTIES`: more librdkafka consumer settings (`key: "value", …`), to try
/// what a setting does to the figures without touching the worker.
let extraConsumerProperties =
    ProcessInfo.processInfo.environment["WORKER_BENCH_CONSUMER_PROPERTIES"].map { ", " + $0 } ?? ""

/// `WORKER_BENCH_PRODUCER_PROPERTIES`: librdkafka settings for the worker's producer (`key: "value", …`).
let producerProperties =
    ProcessInfo.processInfo.environment["WORKER_BENCH_PRODUCER_PROPERTIES"].map {
        "\nproducer:\n  properties: { \($0) }"
    } ?? ""

/// WORKER_BENCH_UNBOUNDED_BYTES=1: the worker as it was before its byte bounds (in flight and the
/// consumer's buffer bounded in records only, librdkafka's 64 MB prefetch), as the reference for
/// memory with large records.
let unboundedBytes = ProcessInfo.processInfo.environment["WORKER_BENCH_UNBOUNDED_BYTES"] == "1"
let byteBoundConsumer = unboundedBytes ? #", queued.max.messages.kbytes: "65536""# : ""
/// `WORKER_BENCH_BUFFER_BYTES`, `WORKER_BENCH_MAX_IN_FLIGHT_BYTES`: other byte bounds to try.
let byteBoundBuffer =
    unboundedBytes
    ? "\n  bufferBytes: 1000000000000"
    : ProcessInfo.processInfo.environment["WORKER_BENCH_BUFFER_BYTES"].map { "\n  bufferBytes: \($0)" } ?? ""
let byteBoundDelivery =
    unboundedBytes
    ? "\n  maxInFlightBytes: 1000000000000"
    : ProcessInfo.processInfo.environment["WORKER_BENCH_MAX_IN_FLIGHT_BYTES"].map { "\n  maxInFlightBytes: \($0)" }
        ?? ""

/// `WORKER_BENCH_CONNECTIONS`: APNs connections per credential (0, the default: the worker's own).
let connections = Int(ProcessInfo.processInfo.environment["WORKER_BENCH_CONNECTIONS"] ?? "") ?? 0
/// `delivery.commitInterval` for the measured worker (its default when unset), e.g. `1s` to compare.
let commitIntervalLine =
    ProcessInfo.processInfo.environment["WORKER_BENCH_COMMIT_INTERVAL"].map {
        "\n  commitInterval: \($0)"
    } ?? ""

/// The worker's settings for the child's peers, as a user would write them. `maxInFlight` 0: the
/// worker's default. `urgentTopics`: `consumer.lanes.urgent.topics` (no lanes when empty).
func configurationText(
    _ peers: Peers.Addresses, group: String, resultsTopic: String, maxInFlight: Int,
    inputTopics: [String] = [Peers.inputTopic], urgentTopics: [String] = []
) -> String {
    let inFlight = maxInFlight > 0 ? "\n  maxInFlight: \(maxInFlight)" : ""
    let connectionsLine = connections > 0 ? "\n  connectionsPerCredential: \(connections)" : ""
    let lanes =
        urgentTopics.isEmpty ? "" : "\n  lanes: { urgent: { topics: [\(urgentTopics.joined(separator: ", "))] } }"
    return """
        kafka:
          bootstrap.servers: "\(peers.bootstrap)"
        consumer:
          group: \(group)
          topics: [\(inputTopics.joined(separator: ", "))]\(lanes)
          properties: { session.timeout.ms: "6000", heartbeat.interval.ms: "500"\(extraConsumerProperties)\(byteBoundConsumer) }\(byteBoundBuffer)\(producerProperties)
        topics:
          results: \(resultsTopic)
          deadLetters: \(Peers.deadLetterTopic)
        apns:\(connectionsLine)
          requestTimeout: 10s
          caFile: "\(peers.caFile)"
          endpoints:
            production: { host: localhost, port: \(peers.simulatorPort) }
            development: { host: localhost, port: \(peers.simulatorPort) }
          credentials:\(credentialsText(keyFile: peers.keyFile))
        delivery:\(commitIntervalLine)\(inFlight)\(byteBoundDelivery)\(sharesLine(maxInFlight: maxInFlight))
          shutdownTimeout: 20s
        http: { host: 127.0.0.1, port: 0 }
        logging: { level: warning, format: text }
        """
}

/// One credential, or one per app (`WORKER_BENCH_APPS`), all signing with the run's key.
func credentialsText(keyFile: String) -> String {
    let token = "token: { teamId: \(Peers.teamID), keyId: \(Peers.keyID), keyFile: \"\(keyFile)\" }"
    guard Peers.apps.count > 1 else {
        return "\n    - name: bench\n      topics: [\"\(Peers.bundleID)\"]\n      \(token)"
    }
    return (0..<Peers.apps.count).map {
        "\n    - name: bench-app\($0)\n      topics: [\"\(Peers.bundleID).app\($0)\"]\n      \(token)"
    }.joined()
}

/// `WORKER_BENCH_SHARES=off`: every app may take the whole in-flight bound (no share binds).
func sharesLine(maxInFlight: Int) -> String {
    guard ProcessInfo.processInfo.environment["WORKER_BENCH_SHARES"] == "off" else { return "" }
    return "\n  maxInFlightPerCredential: \(maxInFlight > 0 ? maxInFlight : DeliverySettings().maxInFlight)"
}

/// An APNs that accepts everything at once: what the pipeline does when APNs costs nothing.
///
/// Its apns-ids count up rather than come from `UUID()`: Foundation's UUID opens, reads and closes
/// /dev/urandom on every call, which cost this sender about 4 µs an event, 13 % of the pipeline's
/// own CPU it is here to measure.
final class InstantSender: NotificationSending {
    private let counter = Atomic<UInt64>(0)

    func send(_ requests: [NotificationRequest]) {
        for request in requests {
            let n = counter.wrappingAdd(1, ordering: .relaxed).newValue
            let hex = String(n, radix: 16)
            let suffix = String(repeating: "0", count: max(0, 12 - hex.utf8.count)) + hex
            let response = APNsResponse(status: 200, apnsID: "00000000-0000-4000-8000-" + suffix)
            request.completion(
                SendAttempt(response: response, error: nil, outcome: .delivered, credential: "bench", duration: .zero))
        }
    }

    func shutdown() async {}
}

/// The peak of VmRSS, read from /proc/self/status every 100 ms on a thread of its own.
/// Also samples the pipeline's in-flight count: near `maxInFlight` the input is paused and the
/// worker waits on APNs or Kafka acknowledgements; far below it, reading is what holds it back.
final class RSSSampler: Sendable {
    private let peak = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let inFlightSum = Atomic<Int>(0)
    private let inFlightSamples = Atomic<Int>(0)

    func start(inFlight: @escaping @Sendable () -> Int) {
        Thread.detachNewThread { [self] in
            while !stopped.load(ordering: .relaxed) {
                let current = Self.residentKiB()
                if current > peak.load(ordering: .relaxed) { peak.store(current, ordering: .relaxed) }
                let running = inFlight()
                if running > 0 {
                    inFlightSum.add(running, ordering: .relaxed)
                    inFlightSamples.add(1, ordering: .relaxed)
                }
                usleep(100_000)
            }
        }
    }

    /// The mean in-flight count over the samples where something was in flight.
    var meanInFlight: Int {
        inFlightSum.load(ordering: .relaxed) / max(inFlightSamples.load(ordering: .relaxed), 1)
    }

    func stop() -> Int {
        stopped.store(true, ordering: .relaxed)
        return max(peak.load(ordering: .relaxed), Self.residentKiB())
    }

    static func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// User + system CPU time of this process so far.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        return user + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// getrusage's ru_maxrss: the kernel's own high-water mark, in KiB.
    static func maxResidentKiB() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss
    }
}

/// Runs one worker until stdin closes, then stops it gracefully and prints its memory figures.
func runWorker(
    _ mode: Mode, peers: Peers.Addresses, group: String, resultsTopic: String, maxInFlight: Int,
    inputTopics: [String], urgentTopics: [String]
) async throws -> Never {
    let sampler = RSSSampler()
    var logger = Logger(label: "bench.worker")
    // `WORKER_BENCH_LOG_LEVEL=debug`, with `debug` in WORKER_BENCH_CONSUMER_PROPERTIES or
    // WORKER_BENCH_PRODUCER_PROPERTIES: librdkafka's own debug lines, on standard error.
    let level = ProcessInfo.processInfo.environment["WORKER_BENCH_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) }
    logger.logLevel = level ?? .warning
    // `APNS_WORKER_*` variables apply as they would to a deployed worker (e.g.
    // `APNS_WORKER_APNS_EVENT_LOOP_THREADS=1`), to try a setting without editing the configuration.
    let configuration = try WorkerConfiguration.parse(
        configurationText(
            peers, group: group, resultsTopic: resultsTopic, maxInFlight: maxInFlight, inputTopics: inputTopics,
            urgentTopics: urgentTopics), file: "<bench>",
        environment: ProcessInfo.processInfo.environment)
    // The operations endpoint's port (`http.port` 0: a free one), for the parent to scrape `/metrics`.
    let assembly = try WorkerRuntime.assemble(configuration, logger: logger, spanExporter: .otlp) { port in
        FileHandle.standardOutput.write(Data("http port=\(port)\n".utf8))
    }
    let services: ServiceGroup
    switch mode {
    case .worker:
        sampler.start { assembly.pipeline.inFlight + (assembly.urgent?.inFlight ?? 0) }
        if let milliseconds = Int(ProcessInfo.processInfo.environment["WORKER_BENCH_TRACE_MS"] ?? "") {
            Timeline.start(every: milliseconds, assembly: assembly)
        }
        services = assembly.serviceGroup(handlingSignals: false)
    case .instant:
        var consumer = configuration.kafkaConsumerConfiguration
        consumer.statisticsInterval = .seconds(10)  // as `assemble` sets it
        let pipeline = WorkerPipeline(
            configuration: assembly.pipeline.configuration, consumer: consumer,
            producer: configuration.kafkaProducerConfiguration, sender: InstantSender(),
            observer: OperationsObserver(metrics: assembly.metrics, health: assembly.health), logger: logger)
        sampler.start { pipeline.inFlight }
        services = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: assembly.operations)]
                    + (assembly.spanExport.map { [.init(service: $0)] } ?? []) + [.init(service: pipeline)],
                logger: logger))
    }
    let running = Task { try await services.run() }
    await untilStandardInputCloses()
    await services.triggerGracefulShutdown()
    try await running.value
    print(
        "rss peak=\(sampler.stop()) maxrss=\(RSSSampler.maxResidentKiB()) cpu=\(RSSSampler.cpuSeconds()) inflight=\(sampler.meanInFlight)"
    )
    exit(0)
}

/// `WORKER_BENCH_TRACE_MS=N`: every N ms, one line on standard error with the worker's counters
/// (`trace t_ms consumed completed answered in_flight paused streams waiting`, then with lanes the
/// urgent lane's `owned in_flight`), to see how input, APNs and results line up in time (e.g. the
/// waves at a long APNs round trip).
enum Timeline {
    static func start(every milliseconds: Int, assembly: WorkerRuntime.Assembly) {
        let names = [
            "apns_worker_events_consumed_total", "apns_worker_events_completed_total",
            "apns_worker_apns_requests_total", "apns_worker_in_flight_events", "apns_worker_consumer_paused",
            "apns_worker_apns_streams_in_use", "apns_worker_apns_requests_waiting",
        ]
        Thread.detachNewThread {
            let start = ContinuousClock.now
            while true {
                assembly.beforeScrape()
                var buffer: [UInt8] = []
                assembly.registry.emit(into: &buffer)
                var sums = [Double](repeating: 0, count: names.count)
                for line in String(decoding: buffer, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
                    let name = line.prefix { $0 != "{" && $0 != " " }
                    guard let index = names.firstIndex(of: String(name)),
                        let value = Double(line.split(separator: " ").last ?? "")
                    else { continue }
                    sums[index] += value
                }
                let elapsed = (ContinuousClock.now - start).components
                let t = elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
                // With lanes, the urgent lane's own: partitions owned, events in flight.
                let urgent = assembly.urgent.map { " \($0.ownedPartitions) \($0.inFlight)" } ?? ""
                FileHandle.standardError.write(
                    Data(("trace \(t) " + sums.map { String(Int($0)) }.joined(separator: " ") + urgent + "\n").utf8))
                usleep(useconds_t(milliseconds * 1000))
            }
        }
    }
}
