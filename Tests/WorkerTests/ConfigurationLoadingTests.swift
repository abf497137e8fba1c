import APNs
import Foundation
import Kafka
import Testing

@testable import Worker

@Suite("Configuration loading")
struct ConfigurationLoadingTests {
    @Test("a minimal file gets every documented default")
    func defaults() throws {
        let configuration = try WorkerConfiguration.parse(ConfigurationFixtures.minimalYAML)
        #expect(configuration.kafka == ["bootstrap.servers": "kafka-0:9092"])
        #expect(configuration.consumer.group == "apns-worker")
        #expect(configuration.consumer.topics == ["notifications"])
        #expect(configuration.consumer.bufferCapacity == 2048)
        #expect(configuration.kafkaConsumerConfiguration.stallBound == .seconds(60))
        #expect(configuration.consumer.properties.isEmpty)
        #expect(configuration.producer.deliveryTimeout == .seconds(300))
        #expect(configuration.producer.properties.isEmpty)
        #expect(configuration.topics == TopicSettings(results: "apns-results", deadLetters: "apns-dead-letters"))
        #expect(configuration.apns.connectionsPerCredential == 8)
        #expect(configuration.apns.requestTimeout == .seconds(15))
        #expect(configuration.apns.caFile == nil)
        #expect(configuration.apns.endpoints.production == .init(host: "api.push.apple.com", port: 443))
        #expect(configuration.apns.endpoints.development == .init(host: "api.sandbox.push.apple.com", port: 443))
        #expect(configuration.delivery.maxInFlight == 10_000)
        #expect(configuration.delivery.commitInterval == .milliseconds(50))
        #expect(configuration.delivery.retry.maxAttempts == 8)
        #expect(configuration.delivery.retry.initialBackoff == .milliseconds(200))
        #expect(configuration.delivery.retry.maxBackoff == .seconds(30))
        #expect(configuration.delivery.retry.maxRetryDuration == .seconds(600))
        #expect(configuration.delivery.revocationTimeout == .seconds(30))
        #expect(configuration.delivery.shutdownTimeout == .seconds(30))
        #expect(configuration.delivery.maxEventAge == .seconds(6 * 3600))
        #expect(configuration.delivery.maxRecordBytes == 256 * 1024)
        #expect(configuration.delivery.publishBlockedLimit == .seconds(300))
        #expect(configuration.http.host == "0.0.0.0")
        #expect(configuration.http.port == 8080)
        #expect(configuration.logging.level == .info)
        #expect(configuration.logging.format == .json)
        #expect(configuration.retryPolicy == RetryPolicy())
    }

    @Test("apns.caFile adds trust anchors to the system store; without it, the system store alone")
    func caFileExtendsTheSystemStore() throws {
        var settings = try WorkerConfiguration.parse(ConfigurationFixtures.minimalYAML).apns
        #expect(settings.tlsTrust == .system)
        settings.caFile = "/etc/apns/proxy-ca.pem"
        #expect(settings.tlsTrust == .systemAnd(caFile: "/etc/apns/proxy-ca.pem"))
    }

    @Test(
        "credential files are read again every 10 s by default, 0 turns it off; keyIdFile names the key id's file, and keyId with it is refused at its line"
    )
    func credentialReload() throws {
        let defaults = try WorkerConfiguration.parse(ConfigurationFixtures.minimalYAML)
        #expect(defaults.apns.credentialReloadInterval == .seconds(10))
        #expect(defaults.apns.connectionReplaceInterval == .seconds(15))
        let apns = ConfigurationFixtures.minimalYAML.replacingOccurrences(
            of: "apns:\n", with: "apns:\n  credentialReloadInterval: 0\n  connectionReplaceInterval: 1m\n")
        let off = try WorkerConfiguration.parse(apns)
        #expect(off.apns.credentialReloadInterval == nil && off.apns.connectionReplaceInterval == .seconds(60))
        let fromFile = try WorkerConfiguration.parse(
            ConfigurationFixtures.minimalYAML.replacingOccurrences(
                of: "keyId: KEY1234567", with: "keyIdFile: /keys/key-id"))
        guard case .token(let token) = fromFile.apns.credentials[0].kind else {
            Issue.record("not a token credential")
            return
        }
        #expect(token.keyID == .file("/keys/key-id"))
        let both = ConfigurationFixtures.minimalYAML.replacingOccurrences(
            of: "keyId: KEY1234567", with: "keyId: KEY1234567, keyIdFile: /keys/key-id")
        let error = #expect(throws: ConfigurationError.self) { try WorkerConfiguration.parse(both) }
        #expect(
            error.map { "\($0)" }?.contains("expected keyId or keyIdFile, not both") == true,
            "\(String(describing: error))")
        let neither = ConfigurationFixtures.minimalYAML.replacingOccurrences(of: "keyId: KEY1234567, ", with: "")
        let missing = #expect(throws: ConfigurationError.self) { try WorkerConfiguration.parse(neither) }
        #expect(missing.map { "\($0)" }?.contains("keyId") == true)
    }

    @Test("delivery.maxEventAge 0 turns the stale-event guard off; a duration sets it")
    func maxEventAge() throws {
        let off = try WorkerConfiguration.parse(ConfigurationFixtures.minimalYAML + "\ndelivery:\n  maxEventAge: 0\n")
        #expect(off.delivery.maxEventAge == nil)
        let hour = try WorkerConfiguration.parse(ConfigurationFixtures.minimalYAML + "\ndelivery:\n  maxEventAge: 1h\n")
        #expect(hour.delivery.maxEventAge == .seconds(3600))
    }

    @Test("every key of the full example is read")
    func fullExample() throws {
        let path = try ConfigurationFixtures.write(ConfigurationFixtures.fullYAML)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try WorkerConfiguration.load(path: path, environment: [:])
        #expect(configuration.kafka["sasl.mechanism"] == "SCRAM-SHA-512")
        #expect(configuration.consumer.group == "pushers")
        #expect(configuration.consumer.topics == ["notifications", "urgent-notifications"])
        #expect(configuration.consumer.bufferCapacity == 4096)
        #expect(configuration.producer.deliveryTimeout == .seconds(120))
        #expect(configuration.apns.connectionsPerCredential == 2)
        #expect(configuration.apns.requestTimeout == .milliseconds(1500))
        #expect(configuration.apns.caFile == "/etc/simulator-ca.pem")
        #expect(configuration.apns.endpoints.production == .init(host: "simulator", port: 8443))
        #expect(configuration.apns.endpoints.development == .init(host: "simulator-dev", port: 443))
        #expect(configuration.apns.credentials.map(\.name) == ["app", "mdm", "legacy"])
        #expect(
            configuration.apns.credentials[0].kind
                == .token(.init(teamID: "ABCDE12345", keyID: "KEY1234567", key: .environment("APNS_KEY_P8"))))
        #expect(
            configuration.apns.credentials[1].kind
                == .certificate(
                    .init(
                        source: .pem(certificateFile: "/secrets/mdm.pem", privateKeyFile: "/secrets/mdm-key.pem"),
                        passwordEnvironmentVariable: "MDM_KEY_PASSWORD")))
        #expect(
            configuration.apns.credentials[2].kind == .certificate(.init(source: .pkcs12(file: "/secrets/legacy.p12"))))
        #expect(configuration.delivery.maxInFlight == 500)
        #expect(configuration.delivery.maxInFlightPerCredential == 200)
        #expect(configuration.delivery.maxParked == 1000)
        #expect(configuration.delivery.commitInterval == .milliseconds(250))
        #expect(configuration.delivery.retry.maxAttempts == 5)
        #expect(configuration.delivery.retry.initialBackoff == .milliseconds(100))
        #expect(configuration.delivery.retry.maxBackoff == .seconds(10))
        #expect(configuration.delivery.retry.maxRetryDuration == .seconds(300))
        #expect(configuration.delivery.revocationTimeout == .seconds(20))
        #expect(configuration.delivery.shutdownTimeout == .seconds(45))
        #expect(configuration.http.host == "127.0.0.1")
        #expect(configuration.http.port == 9090)
        #expect(configuration.logging.level == .debug)
        #expect(configuration.logging.format == .text)
    }

    @Test("Kafka configurations merge kafka, then the client's own properties")
    func kafkaConversions() throws {
        let configuration = try WorkerConfiguration.parse(ConfigurationFixtures.fullYAML)
        let consumer = configuration.kafkaConsumerConfiguration
        #expect(consumer.bootstrapServers == "kafka-0:9092,kafka-1:9092")
        #expect(consumer.groupID == "pushers")
        #expect(consumer.bufferCapacity == 4096)
        func stallBound(_ value: String) throws -> Duration? {
            try WorkerConfiguration.parse(
                ConfigurationFixtures.minimalYAML.replacingOccurrences(
                    of: "  topics: [notifications]", with: "  topics: [notifications]\n  stallAfter: \(value)")
            ).kafkaConsumerConfiguration.stallBound
        }
        #expect(try stallBound("2m") == .seconds(120))
        #expect(try stallBound("0") == nil, "0 turns the watch off")
        #expect(consumer.properties["security.protocol"] == "SASL_SSL")
        #expect(consumer.properties["sasl.username"] == "consumer-user")
        #expect(consumer.properties["fetch.min.bytes"] == "1024")
        #expect(consumer.properties["bootstrap.servers"] == nil)
        let producer = configuration.kafkaProducerConfiguration
        #expect(producer.bootstrapServers == "kafka-0:9092,kafka-1:9092")
        #expect(producer.deliveryTimeout == .seconds(120))
        #expect(producer.properties["sasl.username"] == "apns-worker")
        #expect(producer.properties["linger.ms"] == "10")
        #expect(producer.properties["fetch.min.bytes"] == nil)
        #expect(configuration.retryPolicy.maxAttempts == 5)
    }

    @Test("JSON files load like YAML")
    func json() throws {
        let path = try ConfigurationFixtures.write(ConfigurationFixtures.minimalJSON, extension: "json")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try WorkerConfiguration.load(path: path, environment: [:])
        #expect(configuration.consumer.topics == ["notifications"])
        #expect(configuration.delivery.retry.maxAttempts == 3)
        #expect(configuration.delivery.commitInterval == .seconds(2))
        #expect(configuration.apns.credentials.first?.name == "app")
    }

    @Test("compact JSON (no spaces after colons) loads")
    func compactJSON() throws {
        let compact = ConfigurationFixtures.minimalJSON.replacingOccurrences(of: "\": ", with: "\":")
            .replacingOccurrences(of: "\n", with: "")
        let configuration = try WorkerConfiguration.parse(compact, file: "compact.json")
        #expect(configuration.delivery.retry.maxAttempts == 3)
    }

    @Test(
        "durations",
        arguments: [
            ("200ms", Duration.milliseconds(200)), ("1.5s", .milliseconds(1500)), ("10m", .seconds(600)),
            ("2h", .seconds(7200)), ("30", .seconds(30)), ("0.25", .milliseconds(250)), ("45s", .seconds(45)),
        ])
    func durations(text: String, expected: Duration) {
        #expect(ConfigDuration.parse(text) == expected)
    }

    @Test("bad durations", arguments: ["", "ms", "10 minutes", "1d", "-5s", "1e3s", "s10", "1.2.3s"])
    func badDurations(text: String) {
        #expect(ConfigDuration.parse(text) == nil)
    }
}

@Suite("Configuration loading, JSON edge cases")
struct ConfigurationJSONTests {
    @Test("tab-indented JSON loads")
    func tabs() throws {
        let text =
            "{\n\t\"kafka\": {\"bootstrap.servers\": \"k:9092\"},\n\t\"consumer\": {\"topics\": [\"n\"]},\n"
            + "\t\"topics\": {\"results\": \"r\", \"deadLetters\": \"d\"},\n"
            + "\t\"apns\": {\"credentials\": [{\"name\": \"a\", \"topics\": [\"t\"],\n"
            + "\t\t\"token\": {\"teamId\": \"T\", \"keyId\": \"K\", \"keyFile\": \"/k\"}}]},\n"
            + "\t\"http\": {\"port\": 9000}\n}\n"
        let configuration = try WorkerConfiguration.parse(text, file: "tabs.json")
        #expect(configuration.http.port == 9000)
    }
}

@Suite("Configuration documentation")
struct ConfigurationDocumentationTests {
    /// docs/configuration.md, found from this file's path.
    private var documentation: String {
        get throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            return try String(contentsOf: root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        }
    }

    private func block(_ language: String) throws -> String {
        let text = try documentation
        let start = try #require(text.range(of: "```\(language)\n"))
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    @Test("the documented examples load")
    func examples() throws {
        let yaml = try WorkerConfiguration.parse(block("yaml"), file: "configuration.md (yaml)")
        #expect(yaml.apns.credentials.map(\.name) == ["app", "mdm"])
        let json = try WorkerConfiguration.parse(block("json"), file: "configuration.md (json)")
        #expect(json.consumer.topics == ["notifications"])
    }

    @Test("every key of the schema is documented")
    func everyKeyDocumented() throws {
        let text = try documentation
        for (path, _) in ConfigSchema.worker.leaves() where path != ["kafka"] {
            #expect(text.contains("`\(path.joined(separator: "."))`"), "undocumented: \(path.joined(separator: "."))")
        }
    }
}
