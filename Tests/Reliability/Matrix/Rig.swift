import APNsSimulator
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import TestPeers
import Worker
import WorkerDemo

/// Tansu as the embedded stack's Kafka.
package struct TansuCluster: EmbeddedKafkaCluster {
    package let tansu: TansuBroker
    package init(tansu: TansuBroker) { self.tansu = tansu }
    package var bootstrapServers: String { tansu.bootstrapServers }
    package func create(topic: String, partitions: Int) async throws {
        try await tansu.createTopic(topic, partitions: partitions)
    }
}

/// A scenario's own check failed: the row shows it, and the matrix fails.
package struct ScenarioFailure: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Everything one scenario runs on: Kafka (the mock cluster or Tansu behind its proxy), the APNs
/// simulator behind a proxy of its own, the workers (in this process or as `apns-worker run`
/// processes), and watchers on the input, result and dead-letter topics that see what a downstream
/// consumer would.
package final class Rig: Sendable {
    package let broker: Broker
    package let stack: EmbeddedStack
    package let tansu: TansuBroker?
    /// Between every worker and APNs.
    package let apnsProxy: FaultProxy
    package let logger: Logger
    let input: TopicWatcher
    /// The urgent lane's input topic, in a scenario with lanes.
    let urgentInput: TopicWatcher?
    let results: TopicWatcher
    let deadLetters: TopicWatcher
    /// The SIGKILLs, to tell apart what was pushed again after them.
    let killTrace: KillTrace
    /// Workers are configured with `delivery.progressTopic`.
    let progressTopic: Bool
    private let state = NIOLockedValueBox(State())

    private struct State {
        var simulator: Simulator?
        var workers: [InProcessWorker] = []
        var processes: [BackgroundProgram] = []
        /// Processes the rig SIGKILLed (any other that exits before the rig stops it failed).
        var killed: Set<pid_t> = []
        var faultCleared: ContinuousClock.Instant?
        var configFiles = 0
        /// Worker processes whose log was written (`RELIABILITY_WORKER_LOGS`).
        var loggedProcesses = 0
        /// Per SIGKILL: the device pushes the simulator had accepted on the killed process's
        /// connections without answering yet (read once its connections have closed).
        var floors: [Task<Int, Never>] = []
    }

    package var mock: KafkaMockCluster? { stack.mockCluster }
    package var simulator: Simulator { state.withLockedValue { $0.simulator } ?? stack.simulator }
    package var bootstrapServers: String { stack.cluster.bootstrapServers }

    private init(
        broker: Broker, stack: EmbeddedStack, tansu: TansuBroker?, apnsProxy: FaultProxy, logger: Logger,
        input: TopicWatcher, urgentInput: TopicWatcher?, results: TopicWatcher, deadLetters: TopicWatcher,
        killTrace: KillTrace, progressTopic: Bool
    ) {
        self.broker = broker
        self.stack = stack
        self.tansu = tansu
        self.apnsProxy = apnsProxy
        self.logger = logger
        self.input = input
        self.urgentInput = urgentInput
        self.results = results
        self.deadLetters = deadLetters
        self.killTrace = killTrace
        self.progressTopic = progressTopic
    }

    /// The second input topic of a scenario with lanes: its workers' urgent lane.
    package static let urgentTopic = "urgent-notifications"

    /// `mockBrokers`: brokers in the mock cluster (leader changes need more than one); `partitions`:
    /// of the input and results topics; `tansuStorage`: where Tansu keeps its data; `lanes`: with
    /// `urgentTopic` (2 partitions) too; `progressTopic`: workers configured with
    /// `delivery.progressTopic`.
    package static func start(
        broker: Broker, mockBrokers: Int = 1, partitions: Int = 4, tansuStorage: TansuBroker.Storage = .memory,
        lanes: Bool = false, urgentPartitions: Int = 2, progressTopic: Bool = true,
        groupProtocol: KafkaGroupProtocol = .classic, logger: Logger
    ) async throws -> Rig {
        let tansu = broker == .tansu ? try await TansuBroker.start(storage: tansuStorage) : nil
        var quiet = logger
        quiet.logLevel = .error
        let kafka: (any EmbeddedKafkaCluster)? =
            if let tansu { TansuCluster(tansu: tansu) } else {
                try KafkaMockCluster(brokers: mockBrokers, logger: quiet)
            }
        let stack = try await EmbeddedStack.start(
            partitions: partitions, kafka: kafka, groupProtocol: groupProtocol, logger: logger)
        let apnsProxy = try await FaultProxy.start(upstreamPort: stack.simulator.port)
        let servers = stack.cluster.bootstrapServers
        if lanes { try await stack.cluster.create(topic: urgentTopic, partitions: urgentPartitions) }
        let traced =
            (0..<partitions).map { KafkaTopicPartition(topic: EmbeddedStack.inputTopic, partition: Int32($0)) }
            + (lanes
                ? (0..<urgentPartitions).map { KafkaTopicPartition(topic: urgentTopic, partition: Int32($0)) } : [])
        return Rig(
            broker: broker, stack: stack, tansu: tansu, apnsProxy: apnsProxy, logger: logger,
            input: try await TopicWatcher(
                topic: EmbeddedStack.inputTopic, kind: .input, bootstrapServers: servers, logger: quiet),
            urgentInput: lanes
                ? try await TopicWatcher(topic: urgentTopic, kind: .input, bootstrapServers: servers, logger: quiet)
                : nil,
            results: try await TopicWatcher(
                topic: EmbeddedStack.resultsTopic, kind: .results, bootstrapServers: servers, logger: quiet),
            deadLetters: try await TopicWatcher(
                topic: EmbeddedStack.deadLetterTopic, kind: .deadLetters, bootstrapServers: servers, logger: quiet),
            killTrace: KillTrace(partitions: traced, group: "reliability", bootstrapServers: servers, logger: logger),
            progressTopic: progressTopic)
    }

    // MARK: Input

    /// A mixed batch (alerts, background, VoIP, throttled, unregistered, unknown, not JSON, invalid)
    /// set up on the current simulator.
    package func mixedBatch(_ count: Int, seed: UInt64 = 1) -> SampleBatch {
        SampleBatch.mixed(count: count, topic: EmbeddedStack.inputTopic, simulator: simulator, seed: seed)
    }

    /// A mixed batch for the urgent lane's topic (a scenario with lanes), its events apart from
    /// `mixedBatch`'s.
    package func urgentBatch(_ count: Int, seed: UInt64 = 7) -> SampleBatch {
        SampleBatch.mixed(count: count, topic: Self.urgentTopic, simulator: simulator, seed: seed)
    }

    package func produce(_ records: [KafkaProducerMessage]) async throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: bootstrapServers)
        configuration.linger = .milliseconds(5)
        let producer = try KafkaProducer(configuration: configuration, logger: logger)
        for record in records {
            try await producer.send(record) { _ in }
        }
        try await producer.flush(timeout: .seconds(60))
        await producer.close()
    }

    // MARK: Workers

    /// A worker as `apns-worker run` assembles it, in this process, reaching APNs through the proxy.
    package func startWorker(
        group: String = "reliability", maxInFlight: Int = 20, configure: (inout WorkerConfiguration) -> Void = { _ in }
    ) throws -> InProcessWorker {
        var configuration = try stack.configuration(group: group, maxInFlight: maxInFlight, apnsPort: apnsProxy.port)
        if !progressTopic { configuration.delivery.progressTopic = nil }
        configure(&configuration)
        let assembly = try WorkerRuntime.assemble(configuration, logger: logger)
        let serviceGroup = assembly.serviceGroup(handlingSignals: false)
        let task = Task { try await serviceGroup.run() }
        let worker = InProcessWorker(assembly: assembly, group: serviceGroup, task: task)
        state.withLockedValue { $0.workers.append(worker) }
        return worker
    }

    /// `apns-worker run --config FILE` as its own process (for signals), reaching APNs through the proxy.
    /// `extra` is appended to the configuration file (YAML). In a scenario with lanes, the worker
    /// consumes `urgentTopic` as its urgent lane (`maxInFlight` events in flight there too).
    /// `environment`: added to the process's (`APNS_WORKER_…` overrides, say). `rewrite` changes the
    /// configuration's text before it is written (where a credential's files are, say).
    package func startProcess(
        group: String = "reliability", maxInFlight: Int = 20, extra: String = "", environment: [String: String] = [:],
        rewrite: (String) -> String = { $0 }
    ) throws -> BackgroundProgram {
        let file = state.withLockedValue { state in
            state.configFiles += 1
            return stack.directory + "/worker-\(state.configFiles).yaml"
        }
        var text = stack.configurationText(group: group, maxInFlight: maxInFlight, apnsPort: apnsProxy.port)
        if urgentInput != nil {
            let topics = "  topics: [\(EmbeddedStack.inputTopic)]\n"
            precondition(text.contains(topics), "the stack's configuration names its input topic so")
            text = text.replacingOccurrences(
                of: topics,
                with: "  topics: [\(EmbeddedStack.inputTopic), \(Self.urgentTopic)]\n"
                    + "  lanes: { urgent: { topics: [\(Self.urgentTopic)], maxInFlight: \(maxInFlight) } }\n")
        }
        if !progressTopic {
            let line = "  progressTopic: \(EmbeddedStack.progressTopic)\n"
            precondition(text.contains(line), "the stack's configuration names its progress topic so")
            text = text.replacingOccurrences(of: line, with: "")
        }
        if Self.workerLogDirectory != nil {
            let level = ProcessInfo.processInfo.environment["RELIABILITY_WORKER_LOG_LEVEL"] ?? "info"
            text = text.replacingOccurrences(of: "logging: { level: warning", with: "logging: { level: \(level)")
        }
        try (rewrite(text) + "\n" + extra).write(toFile: file, atomically: true, encoding: .utf8)
        // posix_spawn, not Foundation's Process, whose run() crashes now and then on Linux.
        let process = try spawnInBackground(
            try Self.workerBinary().path, ["run", "--config", file], environment: environment)
        state.withLockedValue { $0.processes.append(process) }
        return process
    }

    /// The `apns-worker` binary built next to this one (or `APNS_WORKER_BIN`).
    static func workerBinary() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["APNS_WORKER_BIN"] { return URL(fileURLWithPath: path) }
        var directories = [
            Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        ]
        directories.append(
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".build/debug"))
        for start in directories {
            var directory = start
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("apns-worker")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw ScenarioFailure("no apns-worker binary next to this one: build it (swift build) or set APNS_WORKER_BIN")
    }

    // MARK: Faults

    /// APNs answers after 100 ms (or `latency`): with the workers' 20 events in flight, each does
    /// about 200 events/s, so a run lasts long enough for a fault to land in the middle of it.
    package func pace(_ latency: FaultInjector.Latency = .fixed(.milliseconds(100))) {
        simulator.faults.latency = latency
    }

    /// SIGKILLs `process` and adds to the row's floor the device pushes the simulator had accepted on
    /// its connections and not answered yet: the worker cannot know of them, so whoever processes
    /// those events next sends them again, however well it hands over. Its connections are those
    /// open just before the kill that have closed 2 s after it (read in the background; `settle`
    /// waits for it). Answers already written but not yet read by the worker are not in the floor.
    package func sigkill(_ process: BackgroundProgram) async {
        let simulator = self.simulator
        let before = await simulator.connections()
        state.withLockedValue { _ = $0.killed.insert(process.processIdentifier) }
        kill(process.processIdentifier, SIGKILL)
        killTrace.killed(at: Date().timeIntervalSince1970, before: before, simulator: simulator)
        process.waitUntilExit()
        let floor = Task {
            try? await Task.sleep(for: .seconds(2))
            let open = Set(await simulator.connections().map(\.id))
            return before.filter { !open.contains($0.id) }.reduce(0) { $0 + $1.acceptancesAwaitingAnswer }
        }
        state.withLockedValue { $0.floors.append(floor) }
    }

    /// How many device pushes the simulator has accepted on connections opened after `mark` (a
    /// reading of `observation.totalConnections`): a worker started after the mark pushes on those
    /// only, so once this is above 0 it owns partitions and works on them.
    package func pushes(onConnectionsAfter mark: Int) async -> Int {
        await simulator.connections().filter { $0.id > mark }.reduce(0) { $0 + $1.acceptedPushes }
    }

    /// The fault is over: recovery is measured from now.
    package func faultCleared() {
        state.withLockedValue { $0.faultCleared = .now }
    }

    /// Stops the simulator (connections drop, the port closes) and after `downtime` starts a new
    /// one with the same CA, keys and port behind the proxy, accepting every device.
    /// `configure` changes the new one's configuration (its token rules, say).
    package func restartSimulator(
        after downtime: Duration, configure: (inout SimulatorConfiguration) -> Void = { _ in }
    ) async throws {
        let old = simulator
        try await old.shutdown()
        try await Task.sleep(for: downtime)
        var configuration = old.configuration
        configure(&configuration)
        let fresh = try await Simulator.start(configuration)
        fresh.devices.policy = .accept
        state.withLockedValue { $0.simulator = fresh }
        await apnsProxy.setUpstream(port: fresh.port)
    }

    // MARK: Waiting

    /// How many results (one per input record) have arrived.
    package var resultCount: Int { results.snapshot.seen.count }

    /// Waits until at least `count` input records have a result.
    package func waitForResults(_ count: Int, within seconds: Double = 120) async throws {
        try await waitUntil(seconds, "\(count) results (have \(resultCount))") { self.resultCount >= count }
    }

    package func waitUntil(_ seconds: Double, _ what: @autoclosure () -> String, _ condition: () async throws -> Bool)
        async throws
    {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            if let exited = exitedOnItsOwn() { throw ScenarioFailure(exited) }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ScenarioFailure("timed out after \(Int(seconds)) s waiting for \(what())")
    }

    /// What a worker process that failed said (its exit status and the last line of its output), if
    /// one did: one that exited with a status other than 0 without the rig SIGKILLing it (it refused
    /// to start, or died). A worker that exits 0 was stopped (SIGTERM) and is not one.
    func exitedOnItsOwn() -> String? {
        let (processes, killed) = state.withLockedValue { ($0.processes, $0.killed) }
        guard
            let (process, status) = processes.lazy.filter({ !killed.contains($0.processIdentifier) })
                .compactMap({ process in process.exitStatus().map { (process, $0) } }).first(where: { $0.1 != 0 })
        else { return nil }
        let said = process.stdout.split(separator: "\n").last.map(String.init) ?? ""
        return "apns-worker run exited with status \(status) on its own"
            + (said.isEmpty ? " (nothing on its standard output)" : ": \(said)")
    }

    /// No worker can finish anything: every worker process has exited and none runs in this process.
    private var nothingRuns: Bool {
        state.withLockedValue { state in
            state.workers.isEmpty && !state.processes.isEmpty && state.processes.allSatisfy { !$0.isRunning }
        }
    }

    // MARK: Measuring

    /// Waits (up to `within`) until every input record has a result and every failure its dead
    /// letter, stops the workers, reads every topic to its end, and counts.
    func settle(within seconds: Double) async -> Measurement {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if complete || nothingRuns { break }
            try? await Task.sleep(for: .milliseconds(250))
        }
        let stuck = state.withLockedValue { $0.workers.map(\.assembly.pipeline.inFlight) }.reduce(0, +)
        await stopWorkers()
        // What was in flight when the workers stopped may still land: read every topic to its end.
        for _ in 0..<100 {
            if inputCaughtUp && results.caughtUp && deadLetters.caughtUp { break }
            try? await Task.sleep(for: .milliseconds(100))
        }
        var measurement = measure()
        measurement.inFlightAtEnd = stuck
        let floors = state.withLockedValue { $0.floors }
        if !floors.isEmpty {
            var floor = 0
            for task in floors { floor += await task.value }
            measurement.floor = floor
        }
        let simulators = state.withLockedValue { [stack.simulator] + [$0.simulator].compactMap { $0 } }
        await attributeRepeatedPushes(simulators)
        for simulator in simulators {
            let repeated = simulator.observation.repeatedAcceptances
            measurement.pushedTwice += repeated.ids
            measurement.extraPushes += repeated.extra
            measurement.untrackedPushes += repeated.untracked
        }
        if measurement.lost > 0 {
            // A second, fresh reader: whether the missing results are missing from the topic, or
            // only from what the first reader saw.
            var quiet = logger
            quiet.logLevel = .error
            if let fresh = try? await TopicWatcher(
                topic: EmbeddedStack.resultsTopic, kind: .results, bootstrapServers: bootstrapServers, logger: quiet)
            {
                for _ in 0..<100 where !fresh.caughtUp { try? await Task.sleep(for: .milliseconds(100)) }
                measurement.freshReaderResults = fresh.snapshot.seen.count
                measurement.freshReaderTotal = fresh.snapshot.total
                measurement.watcherTotal = results.snapshot.total
                await fresh.close()
            }
        }
        return measurement
    }

    /// Every input record read so far has its result (and dead letter), and the input is read to its end.
    private var complete: Bool {
        let measurement = measure()
        return measurement.eventsIn > 0 && measurement.lost == 0 && inputCaughtUp
    }

    private var inputCaughtUp: Bool { input.caughtUp && (urgentInput?.caughtUp ?? true) }

    struct Measurement {
        var eventsIn = 0
        var results = 0
        var deadLetters = 0
        var duplicates = 0
        /// Of the duplicates, results byte for byte the same as the first: the producer published
        /// one result twice (a retry whose first attempt had landed); the rest were processed again.
        var republished = 0
        var lost = 0
        var degradedDeadLetters = 0
        /// Events whose device push the simulator accepted more than once (by `apns-id`), the
        /// acceptances beyond the first, and accepted pushes it could not count (no `apns-id`).
        var pushedTwice = 0
        var extraPushes = 0
        var untrackedPushes = 0
        /// Rows that SIGKILL workers: pushes accepted and not yet answered at the kills, summed.
        var floor: Int?
        var recovery: Duration?
        /// Events the in-process workers still had in flight when the wait ended.
        var inFlightAtEnd = 0
        var freshReaderResults: Int?
        var freshReaderTotal: Int?
        var watcherTotal: Int?
    }

    private func measure() -> Measurement {
        var inputs = input.snapshot
        if let urgent = urgentInput?.snapshot { inputs.seen.merge(urgent.seen) { first, _ in first } }
        let outputs = results.snapshot
        let letters = deadLetters.snapshot
        var measurement = Measurement()
        measurement.eventsIn = inputs.seen.count
        measurement.results = outputs.seen.count
        measurement.deadLetters = letters.seen.count
        measurement.duplicates = outputs.seen.values.reduce(0) { $0 + $1.count - 1 }
        measurement.republished = outputs.seen.values.reduce(0) { $0 + $1.republished }
        measurement.degradedDeadLetters = letters.seen.values.filter(\.degraded).count
        let withoutResult = inputs.seen.keys.filter { outputs.seen[$0] == nil }.count
        let withoutDeadLetter = outputs.seen.filter { $0.value.needsDeadLetter && letters.seen[$0.key] == nil }.count
        measurement.lost = withoutResult + withoutDeadLetter
        if let cleared = state.withLockedValue({ $0.faultCleared }),
            let last = outputs.seen.values.map(\.first).max()
        {
            measurement.recovery = last > cleared ? last - cleared : .zero
        }
        return measurement
    }

    func stopWorkers() async {
        let (workers, processes) = state.withLockedValue { state in
            defer {
                state.workers = []
                state.processes = []
            }
            return (state.workers, state.processes)
        }
        for worker in workers { try? await worker.stop() }
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGCONT)
            process.signal(SIGTERM)
            let deadline = ContinuousClock.now + .seconds(40)
            while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        if let directory = Self.workerLogDirectory {
            for process in processes {
                let index = state.withLockedValue { state in
                    state.loggedProcesses += 1
                    return state.loggedProcesses
                }
                try? process.stdout.write(toFile: "\(directory)/worker-\(index).log", atomically: true, encoding: .utf8)
            }
        }
    }

    /// In a row with SIGKILLs (APNs at a fixed latency or a range), logs what each push made again
    /// followed (`KillTrace`), and with `RELIABILITY_TRACE` set (a directory) writes the kills and the
    /// repeated pushes there as JSON lines.
    private func attributeRepeatedPushes(_ simulators: [Simulator]) async {
        guard !killTrace.isEmpty else { return }
        func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
        let latency: ClosedRange<Double>
        switch simulator.faults.latency {
        case .fixed(let fixed): latency = seconds(fixed)...seconds(fixed)
        case .uniform(let low, let high): latency = seconds(low)...seconds(high)
        case .none: return
        }
        let path = Self.traceDirectory.map { "\($0)/trace-\(broker)-\(UUID().uuidString.prefix(8)).jsonl" }
        let attribution = await killTrace.attribute(
            records: simulators.flatMap(\.observation.records), results: results.snapshot.byAPNsID,
            latency: latency, progressTopic: EmbeddedStack.progressTopic, writingTo: path)
        logger.notice(
            "pushed again after the kills: \(attribution)", metadata: path.map { ["trace": "\($0)"] } ?? [:])
    }

    /// `RELIABILITY_TRACE`: a directory where each row with SIGKILLs writes its trace (`KillTrace`).
    static let traceDirectory = ProcessInfo.processInfo.environment["RELIABILITY_TRACE"]

    /// `RELIABILITY_WORKER_LOGS`: a directory where each `apns-worker run` process's log (at info)
    /// is written when the run ends, as `worker-N.log`.
    static let workerLogDirectory = ProcessInfo.processInfo.environment["RELIABILITY_WORKER_LOGS"]

    package func shutdown() async {
        await stopWorkers()
        await input.close()
        await urgentInput?.close()
        await results.close()
        await deadLetters.close()
        await apnsProxy.shutdown()
        let simulators = state.withLockedValue { [$0.simulator].compactMap { $0 } }
        for simulator in simulators { try? await simulator.shutdown() }
        await stack.shutdown()
        await tansu?.shutdown()
    }
}

/// A worker running in this process.
package struct InProcessWorker: Sendable {
    package let assembly: WorkerRuntime.Assembly
    let group: ServiceGroup
    let task: Task<Void, any Error>

    /// Graceful stop, as SIGTERM would.
    package func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }
}
