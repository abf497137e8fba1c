import APNsSimulator
import Crypto
import Foundation
import Kafka
import Logging

/// The worker's peers, as the child process (`--peers`) runs them: librdkafka's mock cluster and the
/// APNs simulator, with a signing key made for the run and registered with the simulator. Like
/// `EmbeddedStack`, but on their own process so that the worker's CPU time and RSS are its own.
enum Peers {
    static let teamID = "BENCHTEAM1"
    static let keyID = "BENCHKEY01"
    static let bundleID = "com.example.bench"
    static let inputTopic = "bench-notifications"
    static let deadLetterTopic = "bench-dead-letters"
    /// 16 partitions keep a 200,000-event backlog (~60 MB) under the mock's ~5 MiB per partition.
    static let inputPartitions = 16
    /// Results are a little larger than events; 32 partitions leave the same headroom.
    static let resultsPartitions = 32

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
    static func run(resultsTopics: [String]) async throws -> Never {
        var quiet = Logger(label: "bench.peers")
        quiet.logLevel = .error
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("worker-bench-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let key = P256.Signing.PrivateKey()
        let keyFile = directory + "/AuthKey_\(keyID).p8"
        _ = FileManager.default.createFile(
            atPath: keyFile, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600])

        let cluster = try KafkaMockCluster(brokers: 1, logger: quiet)
        try cluster.createTopic(inputTopic, partitions: inputPartitions)
        try cluster.createTopic(deadLetterTopic, partitions: 1)
        for topic in resultsTopics { try cluster.createTopic(topic, partitions: resultsPartitions) }

        var configuration = SimulatorConfiguration(tls: .directory(directory + "/tls"))
        configuration.tokenKeys = [ProviderTokenKey(teamID: teamID, keyID: keyID, publicKey: key.publicKey)]
        configuration.unknownDevices = .accept  // made-up tokens, as a load test sends
        configuration.recordLimit = 0  // keep nothing: the simulator's memory stays flat
        // The simulator's own default (a thread per core) unless WORKER_BENCH_SIMULATOR_THREADS says
        // otherwise. Pinned to one thread it was the worker's bottleneck: its single event loop,
        // serving all four connections, queued answers for ~70 ms at 5,000 in flight.
        if let threads = Int(ProcessInfo.processInfo.environment["WORKER_BENCH_SIMULATOR_THREADS"] ?? "") {
            configuration.threads = threads
        }
        let simulator = try await Simulator.start(configuration)
        // WORKER_BENCH_APNS_LATENCY_MS: APNs answering slowly, as the real one does from afar.
        if let milliseconds = Int(ProcessInfo.processInfo.environment["WORKER_BENCH_APNS_LATENCY_MS"] ?? "") {
            simulator.faults.latency = .fixed(.milliseconds(milliseconds))
        }

        let addresses = Addresses(
            bootstrap: cluster.bootstrapServers, simulatorPort: simulator.port, caFile: directory + "/tls/ca.pem",
            keyFile: keyFile)
        FileHandle.standardOutput.write(Data(addresses.lines.utf8))
        await untilStandardInputCloses()
        try? await simulator.shutdown()
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
