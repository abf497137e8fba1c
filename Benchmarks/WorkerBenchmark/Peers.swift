import APNsSimulator
import Crypto
import Foundation
import Kafka
import Logging
import TestPeers

/// The worker's peers, as the child process (`--peers`) runs them: a Kafka broker (librdkafka's mock
/// cluster, or Tansu with `WORKER_BENCH_BROKER=tansu`) and the APNs simulator, with a signing key made
/// for the run and registered with the simulator. Like `EmbeddedStack`, but on their own process so
/// that the worker's CPU time and RSS are its own.
enum Peers {
    static let teamID = "BENCHTEAM1"
    static let keyID = "BENCHKEY01"
    static let bundleID = "com.example.bench"
    static let inputTopic = "bench-notifications"
    /// `WORKER_BENCH_APPS`: `N` apps (credentials, each with topic `com.example.bench.appK`), events
    /// dealt round the apps in turn; `N:P`: app 0 gets P % of them, the others the rest in turn. 1
    /// (the default): one credential, topic `com.example.bench`. For what fairness between apps
    /// (`delivery.maxInFlightPerCredential`) costs; `WORKER_BENCH_SHARES=off` sets that share to
    /// the whole bound, the reference with the same credentials and no share that binds.
    static let apps: (count: Int, firstPercent: Int?) = {
        let parts = (ProcessInfo.processInfo.environment["WORKER_BENCH_APPS"] ?? "1").split(separator: ":")
        let count = max(1, Int(parts.first ?? "") ?? 1)
        return (count, parts.count > 1 ? Int(parts[1]).map { min(max($0, 0), 100) } : nil)
    }()

    /// The APNs topic of backlog event `index`.
    static func topic(ofEvent index: Int) -> String {
        guard apps.count > 1 else { return bundleID }
        guard let first = apps.firstPercent else { return "\(bundleID).app\(index % apps.count)" }
        // Spread evenly: event `index` is app 0's when the running share crosses a whole event.
        if (index + 1) * first / 100 > index * first / 100 { return "\(bundleID).app0" }
        return "\(bundleID).app\(1 + index % (apps.count - 1))"
    }
    static let deadLetterTopic = "bench-dead-letters"
    /// 16 partitions keep a 200,000-event backlog (~60 MB) under the mock's 5 MiB per partition (it
    /// drops a partition's oldest records beyond that); `WORKER_BENCH_INPUT_PARTITIONS` for larger
    /// backlogs.
    static let inputPartitions = Int(ProcessInfo.processInfo.environment["WORKER_BENCH_INPUT_PARTITIONS"] ?? "") ?? 16
    /// `WORKER_BENCH_BROKER`: `mock` (librdkafka's mock cluster, in the peers process) or `tansu` (an
    /// independent Kafka-compatible broker in a process of its own, behind a Kafka-framing proxy in
    /// the peers process; see docs/reliability.md).
    static let broker = Broker(rawValue: ProcessInfo.processInfo.environment["WORKER_BENCH_BROKER"] ?? "mock") ?? .mock
    /// Results are a little larger than events; 32 partitions leave the same headroom.
    static let resultsPartitions =
        Int(ProcessInfo.processInfo.environment["WORKER_BENCH_RESULTS_PARTITIONS"] ?? "") ?? 32

    /// What the parent needs to reach the peers; one `name=value` line each on the child's stdout.
    struct Addresses {
        var bootstrap = ""
        var simulatorPort = 0
        var caFile = ""
        var keyFile = ""

        var lines: String {
            "bootstrap=\(bootstrap)\nport=\(simulatorPort)\nca=\(caFile)\nkey=\(keyFile)\nready\n"
        }

        mutating func read(_ line: String) -> Bool {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            switch parts.first {
            case "bootstrap": bootstrap = parts[1]
            case "port": simulatorPort = Int(parts[1]) ?? 0
            case "ca": caFile = parts[1]
            case "key": keyFile = parts[1]
            case "ready": return true
            default: break
            }
            return false
        }
    }

    /// Runs until stdin closes, then stops the simulator and removes the key and certificates.
    /// `inputTopics`: more input topics beside `inputTopic`, with their partitions (the lanes
    /// scenario's bulk and urgent topics).
    static func run(resultsTopics: [String], inputTopics: [(name: String, partitions: Int)] = []) async throws -> Never
    {
        var quiet = Logger(label: "bench.peers")
        quiet.logLevel = .error
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("worker-bench-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let key = P256.Signing.PrivateKey()
        let keyFile = directory + "/AuthKey_\(keyID).p8"
        _ = FileManager.default.createFile(
            atPath: keyFile, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600])

        let bootstrap: String
        var cluster: KafkaMockCluster?
        var tansu: TansuBroker?
        switch broker {
        case .mock:
            let mock = try KafkaMockCluster(brokers: 1, logger: quiet)
            try mock.createTopic(inputTopic, partitions: inputPartitions)
            for topic in inputTopics { try mock.createTopic(topic.name, partitions: topic.partitions) }
            try mock.createTopic(deadLetterTopic, partitions: 1)
            for topic in resultsTopics { try mock.createTopic(topic, partitions: resultsPartitions) }
            bootstrap = mock.bootstrapServers
            cluster = mock
        case .tansu:
            let broker = try await TansuBroker.start()
            try await broker.createTopic(inputTopic, partitions: inputPartitions)
            for topic in inputTopics { try await broker.createTopic(topic.name, partitions: topic.partitions) }
            try await broker.createTopic(deadLetterTopic, partitions: 1)
            for topic in resultsTopics { try await broker.createTopic(topic, partitions: resultsPartitions) }
            bootstrap = broker.bootstrapServers
            tansu = broker
        }

        var configuration = SimulatorConfiguration(tls: .directory(directory + "/tls"))
        configuration.tokenKeys = [ProviderTokenKey(teamID: teamID, keyID: keyID, publicKey: key.publicKey)]
        configuration.unknownDevices = .accept  // made-up tokens, as a load test sends
        // Keep nothing, count no apns-id: the simulator's memory stays flat and a 200 takes no lock.
        configuration.recordLimit = 0
        configuration.apnsIDLimit = 0
        // The simulator's own default (a thread per core) unless WORKER_BENCH_SIMULATOR_THREADS says
        // otherwise. Pinned to one thread it was the worker's bottleneck: its single event loop,
        // serving all four connections, queued answers for ~70 ms at 5,000 in flight.
        if let threads = Int(ProcessInfo.processInfo.environment["WORKER_BENCH_SIMULATOR_THREADS"] ?? "") {
            configuration.threads = threads
        }
        let simulator = try await Simulator.start(configuration)
        // WORKER_BENCH_APNS_LATENCY_MS: APNs answering slowly, as the real one does from afar: `50`
        // (every answer 50 ms late) or `100..200` (uniformly between the two).
        if let latency = ProcessInfo.processInfo.environment["WORKER_BENCH_APNS_LATENCY_MS"] {
            let bounds = latency.split(separator: ".", omittingEmptySubsequences: true).compactMap { Int($0) }
            switch bounds.count {
            case 1 where bounds[0] > 0: simulator.faults.latency = .fixed(.milliseconds(bounds[0]))
            case 2: simulator.faults.latency = .uniform(.milliseconds(bounds[0]), .milliseconds(bounds[1]))
            default: break
            }
        }

        let addresses = Addresses(
            bootstrap: bootstrap, simulatorPort: simulator.port, caFile: directory + "/tls/ca.pem",
            keyFile: keyFile)
        FileHandle.standardOutput.write(Data(addresses.lines.utf8))
        await untilStandardInputCloses()
        try? await simulator.shutdown()
        await tansu?.shutdown()
        withExtendedLifetime(cluster) {}
        try? FileManager.default.removeItem(atPath: directory)
        exit(0)
    }
}

/// Returns when the parent closes our stdin (or dies); the blocking read runs on a thread of its own.
func untilStandardInputCloses() async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            _ = FileHandle.standardInput.readDataToEndOfFile()
            done.resume()
        }
    }
}
