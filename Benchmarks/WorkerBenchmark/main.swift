// The worker end to end, in two scenarios (WORKER_BENCH_SCENARIO):
// - drain (the default): a backlog of valid alert events in the broker, then the real worker (4 APNs
//   connections to the simulator) drains it; next to it, in the same run, the same pipeline with an
//   APNs that answers at once. Release build: `make bench BENCH=worker`.
// - latency: open loop, events produced at fixed rates (WORKER_BENCH_RATES) to a running worker,
//   latency from each event's scheduled time to its result read downstream (`OpenLoop`).
// - lanes: urgent events, open loop, while a bulk backlog drains, with and without
//   `consumer.lanes.urgent` (`LanesScenario.swift`).
//
// Three processes: the peers (broker + simulator, `--peers`), the measured worker (`--worker`, so its
// RSS and CPU time are its own) and this one, which produces the events and reads results. Every run
// also prints one `json {…}` line with its figures, which Benchmarks/performance.py collects.
import Foundation
import Kafka
import Logging

let environment = ProcessInfo.processInfo.environment
let eventCount = Int(environment["WORKER_BENCH_EVENTS"] ?? "") ?? 200_000
let rounds = Int(environment["WORKER_BENCH_ROUNDS"] ?? "") ?? 1
let maxInFlight = Int(environment["WORKER_BENCH_MAX_IN_FLIGHT"] ?? "") ?? 5_000
/// Only these modes (comma-separated: worker, instant); all by default.
let modes =
    (environment["WORKER_BENCH_MODES"] ?? "").split(separator: ",").compactMap { Mode(rawValue: String($0)) }
    .nilIfEmpty ?? Mode.allCases
/// A directory: each worker runs under `perf record -g`, its profile written there.
let perfDirectory = environment["WORKER_BENCH_PERF"]
/// A command line (space-separated, absolute path first) to run the measured worker under, e.g.
/// `/usr/bin/env MALLOC_ARENA_MAX=1`: what the worker's process alone gets, not the peers or this one.
let workerWrapper = (environment["WORKER_BENCH_WRAPPER"] ?? "").split(separator: " ").map(String.init)
let runTimeout: Duration = .seconds(Int(environment["WORKER_BENCH_TIMEOUT"] ?? "") ?? 300)
let scenario = environment["WORKER_BENCH_SCENARIO"] ?? "drain"
/// latency: the offered rates, events/s, comma-separated, and how long each is held.
let offeredRates = (environment["WORKER_BENCH_RATES"] ?? "500,2000").split(separator: ",").compactMap { Double($0) }
let stepSeconds = Double(environment["WORKER_BENCH_STEP_SECONDS"] ?? "") ?? 10

func resultsTopic(_ mode: Mode, _ round: Int) -> String { "bench-results-\(mode.rawValue)-\(round)" }

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "--peers":
    // --peers RESULTS_TOPIC… [INPUT_TOPIC:PARTITIONS…]: more input topics than `Peers.inputTopic`.
    let extra = arguments.dropFirst().filter { $0.contains(":") }.map { topic in
        let parts = topic.split(separator: ":")
        return (name: String(parts[0]), partitions: Int(parts[1])!)
    }
    try await Peers.run(resultsTopics: arguments.dropFirst().filter { !$0.contains(":") }, inputTopics: extra)
case "--worker":
    // --worker MODE GROUP RESULTS_TOPIC MAX_IN_FLIGHT BOOTSTRAP PORT CA KEY [INPUT_TOPICS [URGENT_TOPICS]]
    // (topics comma-separated; the input topics are `Peers.inputTopic` and no lanes without them)
    var peers = Peers.Addresses()
    for (name, value) in zip(["bootstrap", "port", "ca", "key"], arguments[5...]) { _ = peers.read("\(name)=\(value)") }
    func topics(_ index: Int) -> [String] {
        index < arguments.count ? arguments[index].split(separator: ",").map(String.init) : []
    }
    try await runWorker(
        Mode(rawValue: arguments[1])!, peers: peers, group: arguments[2], resultsTopic: arguments[3],
        maxInFlight: Int(arguments[4])!, inputTopics: topics(9).nilIfEmpty ?? [Peers.inputTopic],
        urgentTopics: topics(10))
default:
    break
}

var logger = Logger(label: "bench")
logger.logLevel = .error

/// The settings every `json` line repeats, so that a line stands alone.
let settings: [String: any Sendable] = [
    "broker": Peers.broker.rawValue, "connections": connections, "maxInFlight": maxInFlight,
    "apnsLatencyMs": environment["WORKER_BENCH_APNS_LATENCY_MS"] ?? "0",
    "metadataBytes": Int(environment["WORKER_BENCH_METADATA_BYTES"] ?? "") ?? 0,
    "inputPartitions": Peers.inputPartitions,
    "consumerProperties": environment["WORKER_BENCH_CONSUMER_PROPERTIES"] ?? "",
    "producerProperties": environment["WORKER_BENCH_PRODUCER_PROPERTIES"] ?? "",
]

func printJSON(_ fields: [String: any Sendable]) {
    let object = settings.merging(fields) { _, new in new }
    if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
        print("json " + String(decoding: data, as: UTF8.self))
    }
}

if scenario == "latency" {
    try await runLatencyScenario()
    exit(0)
}
if scenario == "lanes" {
    try await runLanesScenario()
    exit(0)
}

print(
    "Worker end to end: \(eventCount) valid alert events as a backlog (\(Peers.inputPartitions) partitions), "
        + "APNs connections \(connections > 0 ? "\(connections)" : "default"), maxInFlight \(maxInFlight > 0 ? "\(maxInFlight)" : "default"); mock cluster + simulator (WORKER_BENCH_SIMULATOR_THREADS or one thread per core) in a process of their own, new for each run"
)

var figures: [Mode: [RunFigures]] = [:]
for round in 0..<rounds {
    for mode in modes {
        let topic = resultsTopic(mode, round)
        // Fresh peers (mock cluster, simulator, backlog) for every run, so that each starts from the same
        // state. One mock broker holding every run's results topic (32 partitions each) serves every run
        // more slowly, the first one included: the harness's cost, not the worker's (figures in
        // Benchmarks/archive/2026-11.md, "The worker against the instant pipeline, fresh peers for every run").
        let peersChild = try Child(["--peers", topic])
        var peers = Peers.Addresses()
        while let line = peersChild.readLine(), !peers.read(line) {}
        guard peers.simulatorPort > 0 else { throw BenchmarkFailure("the peers did not start") }
        let produced = try await Backlog.produce(eventCount, bootstrap: peers.bootstrap, logger: logger)
        if round == 0 && mode == modes[0] {
            print(String(format: "backlog produced in %.1f s (%.0f events/s)", produced, Double(eventCount) / produced))
        }
        // Everything the worker's command line needs, worked out here: the closure runs off the main actor.
        let workerArguments = [
            "--worker", mode.rawValue, "bench-\(mode.rawValue)-\(round)", topic, "\(maxInFlight)", peers.bootstrap,
            "\(peers.simulatorPort)", peers.caFile, peers.keyFile,
        ]
        var wrapper = workerWrapper
        if let perfDirectory {
            wrapper =
                [
                    "/usr/bin/perf", "record", "-F", "499", "-g", "-q", "-o",
                    "\(perfDirectory)/\(mode.rawValue)-\(round).data", "--",
                ] + workerWrapper
        }
        let peersCPUBefore = cpuSeconds(of: peersChild.process.processIdentifier)
        let ownCPUBefore = RSSSampler.cpuSeconds()
        var worker: Child?
        var run = try await readResults(
            topic: topic, count: eventCount, bootstrap: peers.bootstrap, timeout: runTimeout, logger: logger
        ) { [wrapper] in
            worker = try Child(workerArguments, wrapper: wrapper)
            return .now
        }
        run.peersCPUSeconds = cpuSeconds(of: peersChild.process.processIdentifier) - peersCPUBefore
        run.readerCPUSeconds = RSSSampler.cpuSeconds() - ownCPUBefore
        for line in worker?.stop() ?? [] where line.hasPrefix("rss ") {
            for field in line.dropFirst(4).split(separator: " ") {
                let parts = field.split(separator: "=")
                switch parts.first {
                case "peak": run.peakRSSKiB = Int(parts[1]) ?? 0
                case "maxrss": run.maxRSSKiB = Int(parts[1]) ?? 0
                case "cpu": run.cpuSeconds = Double(parts[1]) ?? 0
                case "inflight": run.meanInFlight = Int(parts[1]) ?? 0
                default: break
                }
            }
        }
        print(
            "round \(round + 1) \(mode.rawValue.leftAligned(8))"
                + String(
                    format:
                        "%7d results in %6.2f s: %8.0f events/s, first result after %.2f s, p50 %.1f ms, p99 %.1f ms, peak RSS %.0f MiB",
                    run.results, run.drain, run.rate, run.firstResult ?? -1, run.percentile(0.5), run.percentile(0.99),
                    Double(run.peakRSSKiB) / 1024))
        figures[mode, default: []].append(run)
        _ = peersChild.stop()
        printJSON([
            "scenario": "drain", "mode": mode.rawValue, "round": round, "events": eventCount,
            "results": run.results, "delivered": run.delivered, "rate": run.rate,
            "firstResultSeconds": run.firstResult ?? -1, "peakRSSKiB": run.peakRSSKiB, "maxRSSKiB": run.maxRSSKiB,
            "cpuSeconds": run.cpuSeconds, "peersCPUSeconds": run.peersCPUSeconds,
            "readerCPUSeconds": run.readerCPUSeconds, "meanInFlight": run.meanInFlight,
            "latencyP50Ms": run.percentile(0.5), "latencyP99Ms": run.percentile(0.99),
        ])
    }
}

/// The median run of a mode, by rate.
@MainActor func median(_ mode: Mode) -> RunFigures? {
    guard let runs = figures[mode]?.sorted(by: { $0.rate < $1.rate }), !runs.isEmpty else { return nil }
    return runs[runs.count / 2]
}

@MainActor func column(_ mode: Mode, _ value: (RunFigures) -> String) -> String {
    (median(mode).map(value) ?? "-").leftAligned(24)
}

let header =
    "".leftAligned(34)
    + modes.map { mode in
        (mode == .worker ? "worker (simulator)" : "pipeline, instant APNs").leftAligned(24)
    }.joined()
print("\n" + header)
let rows: [(String, (RunFigures) -> String)] = [
    ("results (delivered)", { "\($0.results) (\($0.delivered))" }),
    ("events/s, first result to last", { String(format: "%.0f", $0.rate) }),
    ("time to first result", { String(format: "%.2f s", $0.firstResult ?? -1) }),
    ("latencyMs p50 / p99", { String(format: "%.1f / %.1f ms", $0.percentile(0.5), $0.percentile(0.99)) }),
    (
        "result lag p50 / p99",
        {
            String(
                format: "%.0f / %.0f ms", $0.percentile(0.5, of: \.resultLags), $0.percentile(0.99, of: \.resultLags))
        }
    ),
    ("mean in flight (bound \(maxInFlight))", { "\($0.meanInFlight)" }),
    ("peak RSS (VmRSS every 100 ms)", { String(format: "%.0f MiB", Double($0.peakRSSKiB) / 1024) }),
    ("ru_maxrss", { String(format: "%.0f MiB", Double($0.maxRSSKiB) / 1024) }),
    ("CPU: worker (user + sys)", { cpu($0.cpuSeconds, $0) }),
    ("CPU: mock cluster + simulator", { cpu($0.peersCPUSeconds, $0) }),
    ("CPU: results reader", { cpu($0.readerCPUSeconds, $0) }),
]
func cpu(_ seconds: Double, _ run: RunFigures) -> String {
    String(format: "%.1f s (%.0f µs/event)", seconds, seconds * 1e6 / Double(max(run.results, 1)))
}
for (name, value) in rows {
    print(name.leftAligned(34) + modes.map { column($0, value) }.joined())
}
print(
    "(goal: >= 30,000 events/s and RSS < 200 MB for the worker; median of \(rounds) round(s); latencyMs is the worker's"
        + " own figure, from taking the event to its result being built; result lag: from then to this reader)")
if modes.count == Mode.allCases.count, let worker = median(.worker), let instant = median(.instant), instant.rate > 0 {
    print(String(format: "worker / instant-APNs pipeline: %.2fx", worker.rate / instant.rate))
}
exit(0)

/// User + system CPU time of another process (from /proc/PID/stat), in seconds.
func cpuSeconds(of pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

extension Array {
    var nilIfEmpty: Self? { isEmpty ? nil : self }
}

extension String {
    func leftAligned(_ width: Int) -> String { padding(toLength: max(width, count + 1), withPad: " ", startingAt: 0) }
}
