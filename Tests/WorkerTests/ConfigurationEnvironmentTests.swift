import Testing

@testable import Worker

@Suite("Configuration environment overrides")
struct ConfigurationEnvironmentTests {
    private func load(_ environment: [String: String]) throws(ConfigurationError) -> WorkerConfiguration {
        try WorkerConfiguration.parse(ConfigurationFixtures.fullYAML, file: "worker.yaml", environment: environment)
    }

    @Test("upper snake case names match camelCase keys, at any depth")
    func scalars() throws {
        let configuration = try load([
            "APNS_WORKER_DELIVERY_MAX_IN_FLIGHT": "50",
            "APNS_WORKER_HTTP_PORT": "0",
            "APNS_WORKER_DELIVERY_RETRY_MAX_ATTEMPTS": "3",
            "APNS_WORKER_DELIVERY_RETRY_INITIAL_BACKOFF": "1s",
            "APNS_WORKER_APNS_ENDPOINTS_PRODUCTION_PORT": "2197",
            "APNS_WORKER_APNS_CA_FILE": "/ca.pem",
            "APNS_WORKER_TOPICS_DEAD_LETTERS": "dlq",
            "APNS_WORKER_LOGGING_FORMAT": "json",
            "PATH": "/usr/bin",  // not ours: ignored
        ])
        #expect(configuration.delivery.maxInFlight == 50)
        #expect(configuration.http.port == 0)
        #expect(configuration.delivery.retry.maxAttempts == 3)
        #expect(configuration.delivery.retry.initialBackoff == .seconds(1))
        #expect(configuration.apns.endpoints.production == .init(host: "simulator", port: 2197))
        #expect(configuration.apns.caFile == "/ca.pem")
        #expect(configuration.topics.deadLetters == "dlq")
        #expect(configuration.logging.format == .json)
    }

    @Test("a section absent from the file is created by an override")
    func createsSections() throws {
        let configuration = try WorkerConfiguration.parse(
            ConfigurationFixtures.minimalYAML,
            environment: ["APNS_WORKER_HTTP_PORT": "9999", "APNS_WORKER_DELIVERY_RETRY_MAX_BACKOFF": "1m"])
        #expect(configuration.http.port == 9999)
        #expect(configuration.http.host == "0.0.0.0")
        #expect(configuration.delivery.retry.maxBackoff == .seconds(60))
    }

    @Test("kafka: _ becomes . and the name is lowercased")
    func kafka() throws {
        let configuration = try load([
            "APNS_WORKER_KAFKA_SASL_PASSWORD": "from-env",
            "APNS_WORKER_KAFKA_BOOTSTRAP_SERVERS": "broker:9093",
        ])
        #expect(configuration.kafka["sasl.password"] == "from-env")
        #expect(configuration.bootstrapServers == "broker:9093")
        #expect(configuration.kafkaProducerConfiguration.properties["sasl.password"] == "from-env")
    }

    @Test("lists are comma-separated")
    func lists() throws {
        let configuration = try load(["APNS_WORKER_CONSUMER_TOPICS": "a, b,c"])
        #expect(configuration.consumer.topics == ["a", "b", "c"])
    }

    @Test(
        "a variable that matches no key is an error naming it",
        arguments: [
            "APNS_WORKER_HTTP_PROT", "APNS_WORKER_DELIVERY", "APNS_WORKER_KAFKA_", "APNS_WORKER_APNS_CREDENTIALS",
            "APNS_WORKER_APNS_CREDENTIALS_0_NAME", "APNS_WORKER_CONSUMER_PROPERTIES_FETCH_MIN_BYTES", "APNS_WORKER_",
        ])
    func unknownVariable(name: String) throws {
        do {
            _ = try load([name: "1"])
            Issue.record("expected an error for \(name)")
        } catch {
            #expect(error.code == .unknownEnvironmentVariable)
            #expect(error.environmentVariable == name)
            #expect(error.description.hasPrefix(name + ": "))
        }
    }

    @Test("a bad value from the environment names the variable and the key")
    func badValue() throws {
        do {
            _ = try load(["APNS_WORKER_DELIVERY_RETRY_MAX_ATTEMPTS": "many"])
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.keyPath == "delivery.retry.maxAttempts")
            #expect(error.environmentVariable == "APNS_WORKER_DELIVERY_RETRY_MAX_ATTEMPTS")
            #expect(
                error.description.hasPrefix("APNS_WORKER_DELIVERY_RETRY_MAX_ATTEMPTS: delivery.retry.maxAttempts: "))
        }
    }

    @Test("every overridable key of the schema is reachable from the environment and read by decoding")
    func schemaMatchesDecoding() throws {
        // Values that decode for any key: a name, a number, or a duration, depending on the key.
        let samples: [String: String] = [
            "host": "h", "port": "1", "group": "g", "results": "r", "deadLetters": "d", "caFile": "/f",
            "level": "info", "format": "json", "topics": "t", "maxRecordBytes": "4096", "maxInFlightBytes": "1048576",
            "bufferBytes": "1048576", "proxy": "none", "collapseIdFromEventId": "true", "progressTopic": "p",
            "tokenPeriod": "1m", "groupProtocol": "consumer", "endpoint": "http://collector:4318",
            "sampleRatio": "0.5", "parent": "none", "serviceName": "pushes",
        ]
        for (path, schema) in ConfigSchema.worker.leaves() {
            guard case .scalar = schema, let key = path.last else {
                if case .list = schema, let key = path.last {
                    let name = "APNS_WORKER_" + path.map(ConfigSchema.upperSnake).joined(separator: "_")
                    _ = try load([name: samples[key] ?? "x"])
                }
                continue
            }
            let name = "APNS_WORKER_" + path.map(ConfigSchema.upperSnake).joined(separator: "_")
            let resolved = try EnvironmentOverrides.resolve(name)
            #expect(resolved.path == path)
            let value =
                samples[key]
                ?? (key.hasSuffix("Timeout") || key.hasSuffix("Interval") || key.hasSuffix("Backoff")
                    || key.hasSuffix("Duration") || key.hasSuffix("Age") || key.hasSuffix("Limit") ? "1s" : "3")
            // Decoding would report an unknown key if the schema named one it does not read.
            _ = try load([name: value])
        }
    }
}
