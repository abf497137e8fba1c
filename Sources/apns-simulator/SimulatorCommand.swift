import APNsSimulator
import ArgumentParser
import Foundation
import Logging
import NIOCore
import ServiceLifecycle

/// `apns-simulator`: the APNs look-alike on its own, for demos, benchmarks and users' integration tests.
@main
struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-simulator",
        abstract: "An APNs look-alike HTTP/2 server with fault injection.",
        discussion: "Prints `listening on HOST:PORT` first; SIGTERM or SIGINT stops it and prints its counters.",
        version: SimulatorVersion.current
    )

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port; 0 picks a free one.") var port = 0
    @Option(
        help: "Uses DIR/server.pem + DIR/server-key.pem; generates DIR/ca.pem and a localhost certificate when missing."
    )
    var tlsDir = "./simulator-tls"
    @Option(help: "Trusted provider token key TEAM:KEYID:PEMFILE (public key or .p8 private key). Repeatable.")
    var tokenKey: [String] = []
    @Option(help: "CA (PEM file) whose client certificates are accepted (certificate-based trust).")
    var clientCa: String?
    @Option(help: "A known device TOKEN[=TOPIC]. Repeatable.") var device: [String] = []
    @Option(help: "An unregistered device TOKEN[=UNIXSECONDS] (410 Unregistered). Repeatable.")
    var unregistered: [String] = []
    @Flag(help: "Accept any well-formed device token.") var acceptAnyDevice = false
    @Flag(help: "Accept requests without credentials when no token key nor client CA is configured.")
    var noAuth = false
    @Option(help: "Fault REASON=RATE, e.g. TooManyRequests=0.05. Repeatable.") var fault: [String] = []
    @Option(help: "Added response time: 5ms, or a uniform range 5ms..50ms.") var latency: String?
    @Option(help: "Send GOAWAY after N requests on a connection.") var goawayAfter: Int?
    @Option(help: "Close a connection abruptly on its Nth request.") var closeAfter: Int?
    @Option(help: "After a non-200 answer, lower MAX_CONCURRENT_STREAMS to N.") var dropStreamsTo: UInt32?
    @Option(help: "MAX_CONCURRENT_STREAMS once a connection is authorized.") var maxStreams: UInt32 = 1000
    @Option(help: "Close idle connections after this long (e.g. 30s) with GOAWAY IdleTimeout.") var idleTimeout: String?
    @Option(help: "Token update window in seconds (APNs: 1200).") var tokenUpdateWindow: Double = 1200
    @Option(help: "Accepted notifications kept in memory (0: none).") var recordLimit = 0
    @Option(help: "Event loop threads.") var threads = System.coreCount
    @Flag(help: "Play the development environment (adds apns-unique-id).") var development = false

    func run() async throws {
        var config = APNsSimulatorConfiguration(tls: .directory(tlsDir))
        config.host = host
        config.port = port
        config.environment = development ? .development : .production
        config.maxConcurrentStreams = maxStreams
        config.tokenUpdateWindow = tokenUpdateWindow
        config.recordLimit = recordLimit
        config.threads = threads
        config.allowsUnauthenticated = noAuth
        config.unknownDevices = acceptAnyDevice ? .accept : .reject
        config.idleTimeout = try idleTimeout.map(Self.duration)
        config.clientCertificateAuthorityPEM = try clientCa.map { try String(contentsOfFile: $0, encoding: .utf8) }
        for spec in tokenKey {
            let parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3 else { throw ValidationError("--token-key wants TEAM:KEYID:PEMFILE, got \(spec)") }
            let pem = try String(contentsOfFile: parts[2], encoding: .utf8)
            config.tokenKeys.append(try ProviderTokenKey(teamID: parts[0], keyID: parts[1], pem: pem))
        }
        for spec in device {
            let (token, topic) = Self.split(spec)
            config.devices[token] = DeviceRegistry.Device(topic: topic)
        }
        for spec in unregistered {
            let (token, since) = Self.split(spec)
            config.unregisteredDevices[token] = since.flatMap(Double.init) ?? Date().timeIntervalSince1970
        }
        let simulator = try await APNsSimulator.start(config)
        for spec in fault {
            let (name, rate) = Self.split(spec)
            guard let reason = APNsReason(named: name), let rate = rate.flatMap(Double.init) else {
                throw ValidationError("--fault wants REASON=RATE with a reason from Apple's table, got \(spec)")
            }
            simulator.faults.setRate(reason, rate)
        }
        if let latency { simulator.faults.latency = try Self.latency(latency) }
        var connectionFaults = FaultInjector.ConnectionFaults()
        connectionFaults.goAwayAfter = goawayAfter
        connectionFaults.closeAfter = closeAfter
        connectionFaults.dropStreamsAfterRejection = dropStreamsTo
        simulator.faults.connection = connectionFaults

        print("listening on \(simulator.host):\(simulator.port)")
        if let ca = simulator.certificateAuthorityPath { print("trust \(ca)") }
        fflush(nil)
        let services = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: APNsSimulatorService(simulator))],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: Logger(label: "apns-simulator")
            )
        )
        try await services.run()
        print(simulator.observation.summary())
        fflush(nil)
    }

    static func split(_ spec: String) -> (String, String?) {
        guard let eq = spec.firstIndex(of: "=") else { return (spec, nil) }
        return (String(spec[..<eq]), String(spec[spec.index(after: eq)...]))
    }

    static func duration(_ text: String) throws -> Duration {
        let units: [(String, Double)] = [("ms", 1e-3), ("us", 1e-6), ("s", 1), ("m", 60)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            if let value = Double(text.dropLast(suffix.count)) { return .nanoseconds(Int64(value * scale * 1e9)) }
        }
        throw ValidationError("not a duration: \(text) (use 5ms, 2s, 1m)")
    }

    static func latency(_ text: String) throws -> FaultInjector.Latency {
        if let range = text.range(of: "..") {
            return .uniform(
                try duration(String(text[..<range.lowerBound])), try duration(String(text[range.upperBound...])))
        }
        return .fixed(try duration(text))
    }
}
