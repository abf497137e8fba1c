// Produce and consume rates of the Kafka wrapper next to kcat's, on the same in-process mock
// cluster, in the same run. Release build: `make bench BENCH=kafka`.
import Foundation
import Kafka
import Logging
import Synchronization

let recordCount = Int(ProcessInfo.processInfo.environment["KAFKA_BENCH_RECORDS"] ?? "") ?? 200_000
let recordSize = 200
// Each figure is the median of this many rounds; the rounds interleave the two clients.
let rounds = 3
let partitions = 4
// The same producer settings for both clients: idempotent, lz4, 5 ms linger.
let producerSettings = ["enable.idempotence": "true", "compression.codec": "lz4", "linger.ms": "5"]

let quiet: Logger = {
    var logger = Logger(label: "bench")
    logger.logLevel = .critical
    return logger
}()

func payload(_ index: Int) -> [UInt8] {
    var bytes = Array("\(index):".utf8)
    bytes.append(contentsOf: repeatElement(UInt8(ascii: "x"), count: recordSize - bytes.count))
    return bytes
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// Runs a command, returns its wall time and whether it succeeded.
func timed(_ path: String, _ arguments: [String], stdinFile: String? = nil) throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    if let stdinFile { process.standardInput = FileHandle(forReadingAtPath: stdinFile) }
    let start = ContinuousClock.now
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw CocoaError(.executableLoad) }
    return seconds(ContinuousClock.now - start)
}

func wrapperProduce(_ bootstrap: String, topic: String) async throws -> Double {
    var configuration = KafkaProducerConfiguration(bootstrapServers: bootstrap)
    configuration.properties = producerSettings
    let producer = try KafkaProducer(configuration: configuration, logger: quiet)
    let failures = Atomic<Int>(0)
    let start = ContinuousClock.now
    for index in 0..<recordCount {
        try await producer.send(KafkaProducerMessage(topic: topic, key: Array("k\(index)".utf8), value: payload(index)))
        {
            if case .failure = $0 { failures.add(1, ordering: .relaxed) }
        }
    }
    try await producer.flush(timeout: .seconds(120))
    let elapsed = seconds(ContinuousClock.now - start)
    await producer.close()
    precondition(failures.load(ordering: .relaxed) == 0, "deliveries failed")
    return elapsed
}

func wrapperConsume(_ bootstrap: String, topic: String) async throws -> Double {
    var configuration = KafkaConsumerConfiguration(bootstrapServers: bootstrap, groupID: "bench-\(topic)")
    configuration.sessionTimeout = .seconds(6)
    let consumer = try KafkaConsumer(configuration: configuration, logger: quiet)
    try consumer.subscribe(topics: [topic])
    var count = 0
    var start: ContinuousClock.Instant?
    var bytes = 0
    for try await record in consumer.messages {
        if start == nil { start = .now }  // group join (about 3 s on the mock cluster) excluded
        bytes &+= record.value?.count ?? 0
        count += 1
        if count == recordCount { break }
    }
    let elapsed = seconds(ContinuousClock.now - start!)
    await consumer.close()
    precondition(bytes == recordCount * recordSize)
    return elapsed
}

// The mock cluster runs in a child process of its own (this binary with `--cluster`), so neither
// client shares a process, or its CPU time, with the brokers.
if CommandLine.arguments.dropFirst().first == "--cluster" {
    let cluster = try KafkaMockCluster(brokers: 1, logger: quiet)
    for round in 0..<rounds {
        for topic in ["ours-\(round)", "theirs-\(round)"] { try cluster.createTopic(topic, partitions: partitions) }
    }
    FileHandle.standardOutput.write(Data((cluster.bootstrapServers + "\n").utf8))
    FileHandle.standardOutput.synchronizeFile()
    _ = FileHandle.standardInput.readDataToEndOfFile()  // until the parent closes our stdin
    exit(0)
}
let clusterProcess = Process()
clusterProcess.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
clusterProcess.arguments = ["--cluster"]
let clusterInput = Pipe()
let clusterOutput = Pipe()
clusterProcess.standardInput = clusterInput
clusterProcess.standardOutput = clusterOutput
try clusterProcess.run()
var bootstrapLine = Data()
while !bootstrapLine.contains(UInt8(ascii: "\n")) {
    bootstrapLine.append(clusterOutput.fileHandleForReading.availableData)
}
let bootstrap = String(decoding: bootstrapLine, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
defer {
    try? clusterInput.fileHandleForWriting.close()
    clusterProcess.waitUntilExit()
}

// kcat reads records from a file, one per line, "key|value".
let inputFile = FileManager.default.temporaryDirectory.appendingPathComponent("kafka-bench-\(getpid()).txt").path
var input = Data()
input.reserveCapacity(recordCount * (recordSize + 10))
for index in 0..<recordCount {
    input.append(contentsOf: Array("k\(index)|".utf8))
    input.append(contentsOf: payload(index))
    input.append(UInt8(ascii: "\n"))
}
try input.write(to: URL(fileURLWithPath: inputFile))
defer { try? FileManager.default.removeItem(atPath: inputFile) }
let kcatSettings = producerSettings.flatMap { ["-X", "\($0.key)=\($0.value)"] }

print(
    "Kafka wrapper vs kcat: mock cluster in its own process, \(recordCount) records of \(recordSize) B, "
        + "\(partitions) partitions, median of \(rounds) interleaved rounds")
var ourProduces: [Double] = [], theirProduces: [Double] = [], ourConsumes: [Double] = [], theirConsumes: [Double] = []
for round in 0..<rounds {
    ourProduces.append(try await wrapperProduce(bootstrap, topic: "ours-\(round)"))
    theirProduces.append(
        try timed(
            "/usr/bin/kcat",
            ["-b", bootstrap, "-P", "-t", "theirs-\(round)", "-K", "|", "-l", inputFile] + kcatSettings))
    ourConsumes.append(try await wrapperConsume(bootstrap, topic: "ours-\(round)"))
    // kcat's simple consumer (no group join) reading every partition to its end.
    theirConsumes.append(
        try timed("/usr/bin/kcat", ["-b", bootstrap, "-C", "-t", "theirs-\(round)", "-o", "beginning", "-e", "-q"]))
}
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
let (ourProduce, theirProduce) = (median(ourProduces), median(theirProduces))
let (ourConsume, theirConsume) = (median(ourConsumes), median(theirConsumes))

func row(_ name: String, _ elapsed: Double) -> String {
    let rate = Double(recordCount) / elapsed
    let megabytes = Double(recordCount * recordSize) / elapsed / 1_048_576
    return name.padding(toLength: 22, withPad: " ", startingAt: 0)
        + String(format: "%12.0f records/s %8.1f MB/s %8.3f s", rate, megabytes, elapsed)
}
print(row("produce  wrapper", ourProduce))
print(row("produce  kcat", theirProduce))
print(row("consume  wrapper", ourConsume))
print(row("consume  kcat", theirConsume))
print(
    String(
        format: "wrapper / kcat rate: produce %.2fx, consume %.2fx (goal: within 2x, i.e. >= 0.50x)",
        theirProduce / ourProduce, theirConsume / ourConsume))
print("(kcat's times include its process start and connect; the wrapper's consume excludes the group join.)")
