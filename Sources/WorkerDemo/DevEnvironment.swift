import APNsSimulator
import Foundation
import Logging
import Worker
import WorkerTelemetry

/// `apns-worker dev`: the demo's embedded pieces, kept running with the worker over them, so a user
/// can produce events with kcat and watch the results arrive. Ends on SIGINT/SIGTERM.
package enum DevEnvironment {
    /// What `dev` is started with: how its simulator misbehaves, and how the worker logs.
    package struct Options: Sendable {
        /// Tokens answered 410 Unregistered: `TOKEN[=UNIXSECONDS]`.
        package var unregistered: [String] = []
        package var unregisteredFraction = 0.0
        package var throttleFraction = 0.0
        package var faultFraction = 0.0
        /// `REASON=RATE`: any reason of Apple's tables.
        package var faults: [String] = []
        package var closeAfter: Int?
        /// `logging.level` and `logging.format` of the configuration `dev` writes and runs.
        package var logLevel = "warning"
        package var logFormat = "text"
        /// `tracing.endpoint` of the configuration `dev` writes: spans to a collector of the user's.
        package var tracingEndpoint: String?

        package init() {}

        /// The simulator's settings, or the first problem of the flags.
        func misbehaviour() throws(APNsSimulatorConfigurationError) -> SimulatorMisbehaviour {
            var misbehaviour = SimulatorMisbehaviour()
            for spec in unregistered { try misbehaviour.addUnregistered(spec) }
            for spec in faults { try misbehaviour.addFault(spec) }
            misbehaviour.unregisteredFraction = unregisteredFraction
            misbehaviour.throttleFraction = throttleFraction
            misbehaviour.faultFraction = faultFraction
            misbehaviour.closeAfter = closeAfter
            try misbehaviour.check()
            return misbehaviour
        }

        /// What is wrong with these options, as a usage error names it; `nil` when `dev` can start.
        package var problem: String? {
            do {
                _ = try misbehaviour()
            } catch {
                return error.description
            }
            if Logger.Level(rawValue: logLevel) == nil {
                let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
                return "--log-level wants one of \(levels), got \(logLevel)"
            }
            if LoggingSettings.Format(rawValue: logFormat) == nil {
                return "--log-format wants text or json, got \(logFormat)"
            }
            return nil
        }
    }

    /// Device tokens of this many bytes are taken as issued by APNs (it issues 32-byte tokens); a token
    /// of another length gets 400 BadDeviceToken, as from APNs.
    package static let tokenBytes = 32

    package static func run(options: Options = Options(), print: @escaping @Sendable (String) -> Void) async throws {
        let misbehaviour = try options.misbehaviour()
        // Quiet until the configuration says how to log: the mock cluster logs at error only.
        var quiet = Logger(label: "apns-worker.dev")
        quiet.logLevel = .error
        let stack = try await EmbeddedStack.start(logger: quiet)
        // Devices are made up on the spot in dev: any token of the length APNs issues is accepted, as if
        // registered; the flags make some of them unregistered, and requests throttled or failed.
        stack.simulator.devices.policy = .acceptLength(bytes: tokenBytes)
        do {
            // A broadcast channel made at start through channel management, for Live Activity updates;
            // the simulator misbehaves from then on (faults apply to channel management too).
            let channel = try await stack.createChannel()
            misbehaviour.apply(to: stack.simulator)
            let logging = "{ level: \(options.logLevel), format: \(options.logFormat) }"
            var configurationText = stack.configurationText(group: "apns-worker-dev", logging: logging)
            if let endpoint = options.tracingEndpoint {
                configurationText += "\ntracing: { endpoint: \"\(endpoint)\" }\n"
            }
            let configurationFile = stack.directory + "/config.yaml"
            try configurationText.write(toFile: configurationFile, atomically: true, encoding: .utf8)
            let configuration = try WorkerConfiguration.parse(configurationText, file: configurationFile)
            // The worker logs as its configuration says, as `apns-worker run` does.
            configuration.logging.bootstrapLoggingSystem()
            let logger = Logger(label: "apns-worker")
            let worker = shellWord(executablePath())
            let assembly = try WorkerRuntime.assemble(configuration, logger: logger, spanExporter: .otlp) { port in
                let bootstrap = stack.cluster.bootstrapServers
                print(
                    """
                    apns-worker dev: the worker runs over an in-process mock Kafka and the APNs simulator.

                      Kafka bootstrap   \(bootstrap)
                      input topic       \(EmbeddedStack.inputTopic)
                      results topic     \(EmbeddedStack.resultsTopic)
                      dead letters      \(EmbeddedStack.deadLetterTopic)
                      APNs simulator    https://localhost:\(stack.simulator.port) (CA \(stack.directory)/tls/ca.pem)
                      channel mgmt      https://localhost:\(stack.simulator.managementPort)
                      broadcast channel \(channel) (\(EmbeddedStack.bundleID), No Message Stored)
                      metrics, health   http://127.0.0.1:\(port)/metrics  /health/live  /health/ready
                      configuration     \(configurationFile)
                      simulator answers \(describe(misbehaviour))

                    Send an event:
                      echo '{"id":"e1","deviceToken":"00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0","topic":"\(EmbeddedStack.bundleID)","pushType":"alert","payload":{"aps":{"alert":"Hi"}}}' \\
                        | kcat -b \(bootstrap) -P -t \(EmbeddedStack.inputTopic)
                    Broadcast a Live Activity update to every device on the channel:
                      echo '{"id":"b1","channelId":"\(channel)","topic":"\(EmbeddedStack.bundleID)","pushType":"liveactivity","priority":10,"expiration":0,"payload":{"aps":{"timestamp":1767225600,"event":"update","content-state":{"score":"2-1"}}}}' \\
                        | kcat -b \(bootstrap) -P -t \(EmbeddedStack.inputTopic)
                    Watch the results and dead letters:
                      kcat -b \(bootstrap) -C -t \(EmbeddedStack.resultsTopic) -f '%k %s\\n'
                      kcat -b \(bootstrap) -C -t \(EmbeddedStack.deadLetterTopic) -J
                    List the app's channels (token key \(stack.keyFile)):
                      \(worker) channels list --bundle-id \(EmbeddedStack.bundleID) --host localhost --port \(stack.simulator.managementPort) \\
                        --ca-file \(stack.directory)/tls/ca.pem --key-file \(stack.keyFile) --team-id \(EmbeddedStack.teamID) --key-id \(EmbeddedStack.keyID)
                    Replay dead letters:
                      \(worker) replay --bootstrap-servers \(bootstrap) --from \(EmbeddedStack.deadLetterTopic) --dry-run

                    Ctrl-C stops everything.
                    """)
            }
            WorkerRuntime.exitOnSecondSignal()
            try await assembly.run()
        } catch {
            await stack.shutdown()
            throw error
        }
        await stack.shutdown()
        // The worker drained and left its group; the mock Kafka and the simulator kept nothing.
        print(
            "apns-worker dev: stopped (the worker drained; the in-process Kafka and simulator are gone with their data)"
        )
    }

    /// What the simulator does besides delivering, for the banner.
    static func describe(_ misbehaviour: SimulatorMisbehaviour) -> String {
        var parts = ["200 to any \(tokenBytes)-byte token, 400 BadDeviceToken to other lengths"]
        let tokens = misbehaviour.unregisteredTokens.count
        if tokens > 0 { parts.append("410 Unregistered to \(tokens) token\(tokens == 1 ? "" : "s")") }
        if misbehaviour.unregisteredFraction > 0 {
            parts.append("410 Unregistered to \(percent(misbehaviour.unregisteredFraction)) of tokens")
        }
        for (reason, rate) in misbehaviour.rates.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            parts.append("\(reason.status) \(reason.rawValue) to \(percent(rate)) of requests")
        }
        if let closeAfter = misbehaviour.closeAfter {
            parts.append("each connection closed on its request \(closeAfter)")
        }
        return parts.joined(separator: "; ")
    }

    static func percent(_ share: Double) -> String {
        let value = share * 100
        return value == value.rounded() ? "\(Int(value))%" : "\(value)%"
    }

    /// The running binary's absolute path, so printed commands work without it on PATH.
    static func executablePath() -> String {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
            path.hasPrefix("/"), FileManager.default.isExecutableFile(atPath: path)
        {
            return path
        }
        let argument = CommandLine.arguments.first ?? "apns-worker"
        // A bare name was found on PATH, where the shell finds it again.
        guard argument.contains("/") else { return argument }
        return URL(fileURLWithPath: argument).standardizedFileURL.path
    }

    /// `word` as one shell word: as it is when it needs no quoting, else in single quotes.
    static func shellWord(_ word: String) -> String {
        let plain = word.unicodeScalars.allSatisfy {
            CharacterSet.alphanumerics.contains($0) && $0.isASCII || "/._+-,:=@%".unicodeScalars.contains($0)
        }
        if plain && !word.isEmpty { return word }
        return "'" + word.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }
}
