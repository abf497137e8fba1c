import Foundation
import Testing

@testable import Worker

@Suite("Configuration errors")
struct ConfigurationErrorTests {
    /// Loads `text` and returns the error it must produce.
    private func failure(
        _ text: String, environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> ConfigurationError {
        do {
            _ = try WorkerConfiguration.parse(text, file: "worker.yaml", environment: environment)
        } catch {
            return error
        }
        Issue.record("expected an error", sourceLocation: sourceLocation)
        throw CancellationError()
    }

    private func replacing(_ old: String, with new: String) -> String {
        precondition(ConfigurationFixtures.fullYAML.contains(old))
        return ConfigurationFixtures.fullYAML.replacingOccurrences(of: old, with: new)
    }

    /// The minimal configuration, then `l0` (nine scalars, anchored) and `levels - 1` more levels of
    /// nine aliases each to the level before, from line 13 on.
    private func nestedAliases(levels: Int) -> String {
        var text = ConfigurationFixtures.minimalYAML + "\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n"
        for level in 1..<levels {
            let aliases = repeatElement("*l\(level - 1)", count: 9).joined(separator: ", ")
            text += "l\(level): &l\(level) [\(aliases)]\n"
        }
        return text
    }

    // Found by FuzzConfiguration (Tests/Fuzz/regressions/FuzzConfiguration/alias-expansion.yaml): Yams
    // resolves aliases to their anchors' nodes, and nine levels of nine aliases were walked as 9^9 nodes.
    @Test("YAML anchors and aliases are refused before any alias is expanded")
    func anchorsAndAliases() throws {
        // Six levels of nine aliases (531,441 scalars expanded: quick enough to fail rather than hang).
        let expansion = try failure(nestedAliases(levels: 6))
        #expect(expansion.code == .invalidValue)
        #expect(expansion.keyPath == "l0")
        #expect(expansion.line == 13)
        #expect(expansion.description == "worker.yaml:13: l0: YAML anchors and aliases are not supported")

        let anchorOnly = try failure(ConfigurationFixtures.minimalYAML + "\nhttp: &h { port: 9090 }\n")
        #expect(anchorOnly.code == .invalidValue)
        #expect(anchorOnly.keyPath == "http")
    }

    // Found by FuzzConfiguration (Tests/Fuzz/regressions/FuzzConfiguration/alias-key-*.yaml): an alias
    // used as a mapping key is hashed by Yams, with all its anchor holds, while it composes the
    // document, before `convert` sees a node: eight levels of nine aliases ran past 10 s. A scan of
    // the text for such keys missed two spellings (`[a, ? *x]`, `[*x:b]`); anchors and aliases are now
    // found in libyaml's own events, before anything is composed.
    @Test("an alias as a mapping key, however it is spelled, is refused before YAML is composed")
    func aliasAsKey() throws {
        let keys = [
            "[*l7: *l7]", "[*l7, ? *l7]", "[*l7:x]", "{*l7 : x}", "{[a, [*l7]]: b}", "\n  ? *l7\n  : b",
            "\n  ? [*l7]\n  : b", "[*l7, *l7, \"a\": *l7, *l7: b]",
        ]
        for key in keys {
            let error = try failure(nestedAliases(levels: 8) + "l8: \(key)\n")
            // The first anchor is refused, with its key and line, as in any other place.
            #expect(error.description == "worker.yaml:13: l0: YAML anchors and aliases are not supported", "\(key)")
        }
        // An alias with no anchor is refused where it is.
        let undefined = try failure(ConfigurationFixtures.minimalYAML + "\ny:\n  - a\n  - ? *x\n    : b\n")
        #expect(undefined.code == .invalidValue)
        #expect(undefined.description == "worker.yaml:15: y[1]: YAML anchors and aliases are not supported")
        // Quoted, commented, inside a plain scalar or a block scalar, `*name` and `&name` are text.
        let text = "a: \"*x: y &z\"\nb: '*x: y' # *x: &y\nc: a*x, y &z\nd: |\n  *x: &y\n"
        let node = try ConfigNode.parse(text, file: "worker.yaml")
        guard case .mapping(let pairs) = node.value else { throw CancellationError() }
        #expect(pairs.map(\.key) == ["a", "b", "c", "d"])
    }

    @Test("an unknown key names its path and line")
    func unknownKey() throws {
        let error = try failure(replacing("    maxAttempts: 5", with: "    maxAtempts: 5"))
        #expect(error.code == .unknownKey)
        #expect(error.keyPath == "delivery.retry.maxAtempts")
        #expect(error.line == 49)
        #expect(
            error.description == "worker.yaml:49: delivery.retry.maxAtempts: unknown key (did you mean maxAttempts?)")
    }

    @Test("unknown keys at the top, in a credential and in an endpoint")
    func unknownKeysElsewhere() throws {
        let top = try failure(ConfigurationFixtures.minimalYAML + "\nmetrics: {}\n")
        #expect(top.code == .unknownKey)
        #expect(top.keyPath == "metrics")
        let credential = try failure(replacing("keyEnv: APNS_KEY_P8", with: "keyEnv: APNS_KEY_P8\n        teamID: X"))
        #expect(credential.keyPath == "apns.credentials[0].token.teamID")
        let endpoint = try failure(replacing("{ host: simulator-dev }", with: "{ host: simulator-dev, prot: 1 }"))
        #expect(endpoint.keyPath == "apns.endpoints.development.prot")
        #expect(endpoint.line == 25)
    }

    // The settings at-least-once rests on could be overridden through a properties map.
    @Test(
        "properties may not turn off what at-least-once rests on",
        arguments: [
            ("consumer", "enable.auto.commit", "true"), ("kafka", "enable.auto.offset.store", "true"),
            ("producer", "enable.idempotence", "false"), ("producer", "acks", "1"),
            // librdkafka's own name for acks, which passed and then failed at start with librdkafka's
            // idempotence error (exit 1), and the settings the check did not know.
            ("producer", "request.required.acks", "1"), ("kafka", "request.required.acks", "0"),
            ("consumer", "isolation.level", "read_uncommitted"), ("kafka", "auto.offset.reset", "latest"),
            ("consumer", "auto.offset.reset", "largest"), ("consumer", "auto.offset.reset", "end"),
        ])
    func guardedProperties(section: String, key: String, value: String) throws {
        let text: String
        switch section {
        case "kafka":
            text = ConfigurationFixtures.minimalYAML.replacingOccurrences(
                of: "  bootstrap.servers: \"kafka-0:9092\"",
                with: "  bootstrap.servers: \"kafka-0:9092\"\n  \(key): \"\(value)\"")
        case "consumer":
            text = ConfigurationFixtures.minimalYAML.replacingOccurrences(
                of: "  topics: [notifications]",
                with: "  topics: [notifications]\n  properties: { \(key): \"\(value)\" }")
        default:
            text = ConfigurationFixtures.minimalYAML + "\nproducer:\n  properties: { \(key): \"\(value)\" }\n"
        }
        let error = try failure(text)
        #expect(error.keyPath?.hasSuffix(key) == true, "\(error)")
        #expect(error.description.contains("at-least-once"), "\(error)")
        #expect(error.line != nil)
    }

    @Test("the values at-least-once needs anyway are accepted")
    func guardedPropertiesAtTheirValues() throws {
        let text =
            ConfigurationFixtures.minimalYAML
            + "\nproducer:\n  properties: { acks: all, request.required.acks: \"-1\", enable.idempotence: \"true\" }\n"
        _ = try WorkerConfiguration.parse(text)
        for reset in ["earliest", "smallest", "beginning", "error"] {
            let consumer = ConfigurationFixtures.minimalYAML.replacingOccurrences(
                of: "  topics: [notifications]",
                with:
                    "  topics: [notifications]\n  properties: { auto.offset.reset: \(reset), isolation.level: read_committed }"
            )
            _ = try WorkerConfiguration.parse(consumer)
        }
    }

    @Test("a revocationTimeout that max.poll.interval.ms cannot hold twice is refused, naming both")
    func revocationTimeoutAgainstPollInterval() throws {
        let text =
            ConfigurationFixtures.minimalYAML.replacingOccurrences(
                of: "  topics: [notifications]",
                with: "  topics: [notifications]\n  properties: { max.poll.interval.ms: \"60000\" }")
            + "\ndelivery:\n  revocationTimeout: 30s\n"
        let error = try failure(text)
        #expect(error.keyPath == "delivery.revocationTimeout")
        #expect(error.description.contains("max.poll.interval.ms"), "\(error)")
        _ = try WorkerConfiguration.parse(
            text.replacingOccurrences(of: "revocationTimeout: 30s", with: "revocationTimeout: 20s"))
    }

    @Test("inline key material and token settings are secrets")
    func inlineSecrets() {
        for key in ["ssl.key.pem", "sasl.oauthbearer.config", "sasl.password", "sasl.oauthbearer.client.secret"] {
            #expect(ConfigSecrets.isSecret(key: key), "\(key)")
        }
        #expect(!ConfigSecrets.isSecret(key: "ssl.ca.location"))
    }

    @Test("librdkafka property maps take any property librdkafka knows; one it refuses is a configuration error")
    func freeFormMaps() throws {
        let text = replacing("linger.ms: 10", with: "linger.ms: 10\n    queue.buffering.max.kbytes: 2048")
        let configuration = try WorkerConfiguration.parse(text)
        #expect(configuration.producer.properties["queue.buffering.max.kbytes"] == "2048")

        let unknown = try failure(replacing("linger.ms: 10", with: "linger.ms: 10\n    anything.goes: yes"))
        #expect(unknown.code == .invalidValue)
        #expect(unknown.keyPath == "producer.properties.anything.goes")
        #expect(unknown.message.contains("No such configuration property"), "\(unknown)")
        let fromVariable = try failure(
            ConfigurationFixtures.fullYAML, environment: ["APNS_WORKER_KAFKA_SOCKET_TIMEOUT_MS": "soon"])
        #expect(fromVariable.environmentVariable == "APNS_WORKER_KAFKA_SOCKET_TIMEOUT_MS", "\(fromVariable)")
        #expect(fromVariable.keyPath == "kafka.socket.timeout.ms")
        let badValue = try failure(replacing("linger.ms: 10", with: "linger.ms: soon"))
        #expect(badValue.keyPath == "producer.properties.linger.ms", "\(badValue)")
    }

    @Test("a results or dead-letter topic that is also an input topic is refused (the worker would eat its own output)")
    func outputTopicLoops() throws {
        let results = try failure(replacing("results: apns-results", with: "results: urgent-notifications"))
        #expect(results.keyPath == "topics.results")
        #expect(results.message.contains("also an input topic"), "\(results)")
        let deadLetters = try failure(replacing("deadLetters: apns-dead-letters", with: "deadLetters: notifications"))
        #expect(deadLetters.keyPath == "topics.deadLetters")
        #expect(deadLetters.line != nil)
        let same = try failure(replacing("deadLetters: apns-dead-letters", with: "deadLetters: apns-results"))
        #expect(same.keyPath == "topics.deadLetters")
    }

    @Test("a bad value names the key and what was expected")
    func badValues() throws {
        let port = try failure(replacing("port: 9090", with: "port: ninety"))
        #expect(port.code == .invalidValue)
        #expect(port.keyPath == "http.port")
        #expect(port.line == 57)
        #expect(port.message.contains("expected an integer from 0 to 65535"))
        #expect(port.message.contains("\"ninety\""))

        let duration = try failure(replacing("commitInterval: 250ms", with: "commitInterval: soon"))
        #expect(duration.keyPath == "delivery.commitInterval")
        #expect(duration.message.contains("duration"))

        let level = try failure(replacing("level: debug", with: "level: verbose"))
        #expect(level.keyPath == "logging.level")
        #expect(level.message.contains("trace, debug, info, notice, warning, error, critical"))

        let list = try failure(replacing("topics: [notifications, urgent-notifications]", with: "topics: {a: b}"))
        #expect(list.keyPath == "consumer.topics")

        let section = try failure(replacing("http:\n  host: 127.0.0.1\n  port: 9090", with: "http: 8080"))
        #expect(section.keyPath == "http")
        #expect(section.message.contains("expected a mapping"))

        let zero = try failure(replacing("maxInFlight: 500", with: "maxInFlight: 0"))
        #expect(zero.keyPath == "delivery.maxInFlight")

        let pattern = try failure(replacing(#"["com.apple.mgmt.External.*"]"#, with: #"["com.*.mgmt"]"#))
        #expect(pattern.keyPath == "apns.credentials[1].topics")
    }

    @Test("missing required keys are named")
    func missingKeys() throws {
        let minimal = ConfigurationFixtures.minimalYAML
        let noResults = try failure(minimal.replacingOccurrences(of: "  results: apns-results\n", with: ""))
        #expect(noResults.code == .missingKey)
        #expect(noResults.keyPath == "topics.results")
        let noServers = try failure(minimal.replacingOccurrences(of: "bootstrap.servers", with: "client.id"))
        #expect(noServers.keyPath == "kafka.bootstrap.servers")
        let noTopics = try failure(minimal.replacingOccurrences(of: "topics: [notifications]", with: "topics: []"))
        #expect(noTopics.keyPath == "consumer.topics")
        let noKey = try failure(minimal.replacingOccurrences(of: ", keyFile: /keys/AuthKey.p8", with: ""))
        #expect(noKey.keyPath == "apns.credentials[0].token.keyFile")
        let empty = try failure("")
        #expect(empty.keyPath == "kafka")
    }

    @Test("a syntax error gives the line, not the text of the line")
    func syntax() throws {
        let text = replacing("sasl.password: hunter2-very-secret", with: "sasl.password: \"hunter2-very-secret")
        let error = try failure(text)
        #expect(error.code == .syntax)
        #expect(error.line != nil)
        #expect(!error.description.contains("hunter2"))
    }

    @Test("an unreadable file names the file")
    func unreadable() throws {
        #expect(throws: ConfigurationError.self) {
            try WorkerConfiguration.load(path: "/nonexistent/worker.yaml", environment: [:])
        }
        do {
            _ = try WorkerConfiguration.load(path: "/nonexistent/worker.yaml", environment: [:])
        } catch {
            #expect(error.code == .unreadableFile)
            #expect(error.description.hasPrefix("/nonexistent/worker.yaml: cannot read the file"))
        }
    }

    @Test("secret values never appear in errors")
    func secretsRedacted() throws {
        // A secret-looking key where a mapping was expected, and a bad value under a secret key.
        let kafka = try failure(
            replacing("sasl.password: hunter2-very-secret", with: "sasl.password: [hunter2-very-secret]"))
        #expect(kafka.keyPath == "kafka.sasl.password")
        #expect(!kafka.description.contains("hunter2"))
        let environment = try failure(
            ConfigurationFixtures.minimalYAML, environment: ["APNS_WORKER_HTTP_PORT": "s3cr3t-value"])
        #expect(environment.description.contains("\"s3cr3t-value\""))  // not a secret key: shown
        #expect(ConfigSecrets.isSecret(key: "kafka.ssl.key.password"))
        #expect(ConfigSecrets.isSecret(key: "kafka.sasl.oauthbearer.client.secret"))
        #expect(!ConfigSecrets.isSecret(key: "kafka.sasl.username"))
        let configuration = try WorkerConfiguration.parse(
            ConfigurationFixtures.fullYAML, environment: ["APNS_WORKER_KAFKA_SSL_KEY_PASSWORD": "pem-pass-123"])
        #expect(!"\(configuration)".contains("hunter2"))
        #expect(!"\(configuration)".contains("pem-pass-123"))
        #expect("\(configuration)".contains("sasl.password=<redacted>"))
        #expect(ConfigSecrets.redacted(["sasl.password": "x", "a": "b"]) == ["sasl.password": "<redacted>", "a": "b"])
    }
}

/// Every number in the file has a range that `check` and the start enforce, so that no value the file
/// accepts can make the worker trap on arithmetic at start.
@Suite("Numeric settings have ranges")
struct NumericRangeTests {
    static let lanes = "\n  lanes:\n    urgent:\n      topics: [urgent]"

    /// The minimal file with two credentials, an urgent lane, and `delivery` set to `settings`.
    static func file(delivery settings: String) -> String {
        ConfigurationFixtures.minimalYAML
            .replacingOccurrences(of: "  topics: [notifications]", with: "  topics: [notifications, urgent]" + lanes)
                + """

                    - name: other
                      topics: ["com.example.other"]
                      token: { teamId: ABCDE12345, keyId: KEY7654321, keyFile: /keys/Other.p8 }
                delivery:
                \(settings)
                """
    }

    @Test(
        "a huge maxParked or maxInFlightPerCredential is refused with file:line, not a trap at start",
        arguments: ["  maxParked: 9223372036854775807", "  maxInFlightPerCredential: 9223372036854775807"])
    func hugeValuesAreRefused(_ setting: String) throws {
        do {
            let configuration = try WorkerConfiguration.parse(Self.file(delivery: setting), file: "worker.yaml")
            // What `run` computes at start from the two: each must stay in range.
            let delivery = configuration.delivery
            _ = delivery.credentialCap(bound: delivery.maxInFlight, credentials: 2)
            _ = delivery.parkedBound(forLaneOf: configuration.consumer.urgent!.maxInFlight)
            Issue.record("\(setting) was taken")
        } catch {
            #expect(error.description.hasPrefix("worker.yaml:"), "\(error)")
            #expect(error.description.contains("expected an integer from 1 to"), "\(error)")
        }
    }

    @Test("at the top of every range, what the worker computes from the settings does not overflow")
    func largestValuesComputeSafely() throws {
        let top = """
              maxInFlight: 1000000
              maxParked: 10000000
              maxInFlightPerCredential: 1000000
              maxInFlightBytes: 17179869184
            """
        let configuration = try WorkerConfiguration.parse(Self.file(delivery: top))
        let delivery = configuration.delivery
        #expect(delivery.credentialCap(bound: delivery.maxInFlight, credentials: 2) == nil)
        #expect(delivery.parkedBound(forLaneOf: 1_000_000) == 10_000_000)
        #expect(delivery.parkedBound(forLaneOf: 1) == 10)
    }
}
