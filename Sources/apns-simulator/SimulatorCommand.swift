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
        discussion: """
            Prints `listening on HOST:PORT` (device pushes and broadcasts) first, then `managing channels on \
            HOST:PORT` (channel management), then `trust CA` and a `channel BUNDLE:POLICY:ID` line per --channel; \
            SIGTERM or SIGINT stops it and prints its counters.
            """,
        version: SimulatorVersion.current
    )

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port of device pushes and broadcasts; 0 picks a free one.") var port = 0
    @Option(help: "Port of channel management (same host, TLS and trust); 0 picks a free one.") var managePort = 0
    @Option(
        help: "Uses DIR/server.pem + DIR/server-key.pem; generates DIR/ca.pem and a localhost certificate when missing."
    )
    var tlsDir = "./simulator-tls"
    @Option(
        help: """
            Trusted provider token key TEAM:KEYID:PEMFILE[:development|production] (public key or .p8 private key; \
            with an environment, the key works in that environment only). Repeatable.
            """)
    var tokenKey: [String] = []
    @Option(
        help: "Two token keys KEYID:KEYID that are related (a connection may switch between them). Repeatable.")
    var relatedKeys: [String] = []
    @Option(help: "CA (PEM file) whose client certificates are accepted (certificate-based trust).")
    var clientCa: String?
    @Option(help: "A known device TOKEN[=TOPIC]. Repeatable.") var device: [String] = []
    @Option(help: "An unregistered device TOKEN[=UNIXSECONDS] (410 Unregistered). Repeatable.")
    var unregistered: [String] = []
    @Flag(help: "Accept any well-formed device token.") var acceptAnyDevice = false
    @Option(
        help: """
            Accept any device token of N bytes (2N hex digits; APNs issues 32-byte tokens) and answer 400 \
            BadDeviceToken to other lengths.
            """)
    var acceptTokenBytes: Int?
    @Option(
        help: """
            The share (0 to 1) of accepted unknown tokens answered 410 Unregistered, picked by each token's \
            hash (a token keeps its answer). Needs --accept-any-device or --accept-token-bytes.
            """)
    var unregisteredFraction = 0.0
    @Option(help: "The share (0 to 1) of otherwise successful requests answered 429 TooManyRequests.")
    var throttleFraction = 0.0
    @Option(
        help: """
            The share (0 to 1) of otherwise successful requests answered a server error, half 500 \
            InternalServerError and half 503 ServiceUnavailable.
            """)
    var faultFraction = 0.0
    @Option(
        help: """
            A broadcast channel BUNDLE:POLICY[:ID] created at start (POLICY 0: no message stored, 1: most recent \
            message stored; ID: base64, made up when left out). Repeatable.
            """)
    var channel: [String] = []
    @Option(help: "An app (bundle ID) without the broadcast capability (FeatureNotEnabled). Repeatable.")
    var broadcastDisabled: [String] = []
    @Option(help: "Channels one app may have (CannotCreateChannelConfig beyond).") var channelLimit = 10_000
    @Flag(help: "Accept requests without credentials when no token key nor client CA is configured.")
    var noAuth = false
    @Option(
        help: """
            Fault REASON=RATE, e.g. TooManyRequests=0.05 or FeatureNotEnabled=0.1: any reason of Apple's tables, \
            or "Service Unavailable" as the broadcast table spells it. Repeatable.
            """)
    var fault: [String] = []
    @Option(help: "Added response time: 5ms, or a uniform range 5ms..50ms.") var latency: String?
    @Option(help: "Send GOAWAY after N requests on a connection.") var goawayAfter: Int?
    @Option(help: "Close a connection abruptly on its Nth request.") var closeAfter: Int?
    @Option(help: "After a non-200 answer, lower MAX_CONCURRENT_STREAMS to N.") var dropStreamsTo: UInt32?
    @Option(help: "MAX_CONCURRENT_STREAMS once a connection is authorized.") var maxStreams: UInt32 = 1000
    @Option(help: "Close idle connections after this long (e.g. 30s) with GOAWAY IdleTimeout.") var idleTimeout: String?
    @Option(
        help: """
            A connection that changes its provider token less than S seconds after it first used its current \
            token gets 429 TooManyProviderTokenUpdates and refuses every request for S seconds (APNs: 1200; \
            0: off).
            """)
    var tokenUpdateWindow: Double = 1200
    @Option(
        help: """
            At most K distinct tokens of one key first taken within --tokens-per-key-window, over all \
            connections; a request bringing another gets 429 TooManyProviderTokenUpdates (0: off).
            """)
    var tokensPerKey = 2
    @Option(help: "The window of --tokens-per-key, in seconds.") var tokensPerKeyWindow: Double = 1200
    @Option(help: "Accepted notifications kept in memory (0: none).") var recordLimit = 0
    @Option(help: "Distinct apns-ids whose acceptances are counted, to report pushes accepted twice (0: none).")
    var apnsIdLimit = 0
    @Option(help: "Event loop threads.") var threads = System.coreCount
    @Flag(help: "Play the development environment (adds apns-unique-id).") var development = false

    func run() async throws {
        var config = SimulatorConfiguration(tls: .directory(tlsDir))
        config.host = host
        config.port = port
        config.managementPort = managePort
        config.environment = development ? .development : .production
        config.maxConcurrentStreams = maxStreams
        guard tokenUpdateWindow >= 0, tokensPerKey >= 0, tokensPerKeyWindow >= 0 else {
            throw ValidationError("--token-update-window, --tokens-per-key and --tokens-per-key-window take 0 or more")
        }
        config.tokenUpdateWindow = tokenUpdateWindow
        config.tokensPerKey = tokensPerKey
        config.tokensPerKeyWindow = tokensPerKeyWindow
        config.recordLimit = recordLimit
        config.apnsIDLimit = apnsIdLimit
        config.threads = threads
        config.allowsUnauthenticated = noAuth
        if acceptAnyDevice, acceptTokenBytes != nil {
            throw ValidationError("--accept-any-device and --accept-token-bytes: choose one")
        }
        if let bytes = acceptTokenBytes, bytes < 1 {
            throw ValidationError("--accept-token-bytes wants a length from 1, got \(bytes)")
        }
        config.unknownDevices =
            acceptAnyDevice ? .accept : acceptTokenBytes.map { .acceptLength(bytes: $0) } ?? .reject
        config.idleTimeout = try idleTimeout.map { try Self.duration($0, flag: "--idle-timeout") }
        config.clientCertificateAuthorityPEM = try clientCa.map { try String(contentsOfFile: $0, encoding: .utf8) }
        for spec in tokenKey {
            config.tokenKeys.append(try Self.tokenKey(spec))
        }
        for spec in relatedKeys {
            let ids = spec.split(separator: ":").map(String.init)
            guard ids.count == 2, let index = config.tokenKeys.firstIndex(where: { $0.keyID == ids[0] }),
                config.tokenKeys.contains(where: { $0.keyID == ids[1] })
            else { throw ValidationError("--related-keys wants KEYID:KEYID of two --token-key keys, got \(spec)") }
            config.tokenKeys[index].relatedKeyID = ids[1]
        }
        config.channels = try channel.map(Self.channel)
        config.broadcastDisabledBundleIDs = Set(broadcastDisabled)
        config.channelLimit = channelLimit
        for spec in device {
            let (token, topic) = Self.split(spec)
            config.devices[token] = DeviceRegistry.Device(topic: topic)
        }
        // Every flag read before anything listens: a typo stops it without a port bound.
        var misbehaviour = SimulatorMisbehaviour()
        do {
            for spec in unregistered { try misbehaviour.addUnregistered(spec) }
            for spec in fault { try misbehaviour.addFault(spec) }
        } catch {
            throw ValidationError(error.description)
        }
        misbehaviour.unregisteredFraction = unregisteredFraction
        misbehaviour.throttleFraction = throttleFraction
        misbehaviour.faultFraction = faultFraction
        misbehaviour.closeAfter = closeAfter
        if let problem = misbehaviour.problems.first { throw ValidationError(problem) }
        if unregisteredFraction > 0, config.unknownDevices == .reject {
            throw ValidationError("--unregistered-fraction needs --accept-any-device or --accept-token-bytes")
        }
        let latency = try self.latency.map(Self.latency)
        let simulator = try await Simulator.start(config)
        if let latency { simulator.faults.latency = latency }
        var connectionFaults = FaultInjector.ConnectionFaults()
        connectionFaults.goAwayAfter = goawayAfter
        connectionFaults.dropStreamsAfterRejection = dropStreamsTo
        simulator.faults.connection = connectionFaults
        misbehaviour.apply(to: simulator)

        // The first line stays `listening on HOST:PORT`: tests and users parse it.
        print("listening on \(simulator.host):\(simulator.port)")
        print("managing channels on \(simulator.host):\(simulator.managementPort)")
        if let ca = simulator.certificateAuthorityPath { print("trust \(ca)") }
        for channel in simulator.presetChannels {
            print("channel \(channel.bundleID):\(channel.storagePolicy.rawValue):\(channel.id)")
        }
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

    /// `TEAM:KEYID:PEMFILE[:development|production]`; the file name may itself hold colons.
    static func tokenKey(_ spec: String) throws -> ProviderTokenKey {
        var parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
        guard parts.count == 3 else {
            throw ValidationError("--token-key wants TEAM:KEYID:PEMFILE[:development|production], got \(spec)")
        }
        var environment: SimulatorEnvironment?
        for candidate in [SimulatorEnvironment.development, .production]
        where parts[2].hasSuffix(":" + candidate.rawValue) {
            environment = candidate
            parts[2] = String(parts[2].dropLast(candidate.rawValue.count + 1))
        }
        if environment == nil, !FileManager.default.fileExists(atPath: parts[2]),
            let colon = parts[2].lastIndex(of: ":"), FileManager.default.fileExists(atPath: String(parts[2][..<colon]))
        {
            throw ValidationError(
                "--token-key: the environment is development or production, got \(parts[2][colon...].dropFirst())")
        }
        let pem = try String(contentsOfFile: parts[2], encoding: .utf8)
        return try ProviderTokenKey(teamID: parts[0], keyID: parts[1], pem: pem, environment: environment)
    }

    /// `BUNDLE:POLICY[:ID]`.
    static func channel(_ spec: String) throws -> ChannelRegistry.Preset {
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 || parts.count == 3, !parts[0].isEmpty,
            let policy = Int(parts[1]).flatMap(ChannelRegistry.StoragePolicy.init(rawValue:))
        else { throw ValidationError("--channel wants BUNDLE:POLICY[:ID] with POLICY 0 or 1, got \(spec)") }
        return ChannelRegistry.Preset(bundleID: parts[0], storagePolicy: policy, id: parts.count == 3 ? parts[2] : nil)
    }

    static func split(_ spec: String) -> (String, String?) {
        guard let eq = spec.firstIndex(of: "=") else { return (spec, nil) }
        return (String(spec[..<eq]), String(spec[spec.index(after: eq)...]))
    }

    static func duration(_ text: String, flag: String) throws -> Duration {
        let units: [(String, Double)] = [("ms", 1e-3), ("us", 1e-6), ("s", 1), ("m", 60)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            if let value = Double(text.dropLast(suffix.count)) { return .nanoseconds(Int64(value * scale * 1e9)) }
        }
        throw ValidationError("\(flag): not a duration: \(text) (use 5ms, 2s, 1m)")
    }

    static func latency(_ text: String) throws -> FaultInjector.Latency {
        if let range = text.range(of: "..") {
            return .uniform(
                try duration(String(text[..<range.lowerBound]), flag: "--latency"),
                try duration(String(text[range.upperBound...]), flag: "--latency"))
        }
        return .fixed(try duration(text, flag: "--latency"))
    }
}
