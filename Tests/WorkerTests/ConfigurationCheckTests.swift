import Foundation
import Kafka
import TestPeers
import Testing

@testable import Worker

/// `apns-worker check`: the configuration as `run` would load it, the keys opened, the topics
/// looked up on a broker the test starts.
@Suite("Configuration check", .timeLimit(.minutes(2)))
struct ConfigurationCheckTests {
    /// How long a check waits for a broker that is up: it answers as soon as the broker has, so only
    /// a machine too busy to let it finish sooner ever waits this long (10 s, the default, was not
    /// always enough beside the other test targets).
    static let patience: Duration = .seconds(60)

    static func write(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("check-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A configuration for `servers` whose credential's key is the file at `keyFile`.
    static func configuration(
        servers: String, keyFile: String, deadLetters: String = "apns-dead-letters", kafka: [String: String] = [:],
        progressTopic: String? = nil
    ) -> String {
        let properties =
            kafka.isEmpty
            ? "  sasl.password: hunter2"
            : kafka.sorted { $0.key < $1.key }.map { "  \($0.key): \"\($0.value)\"" }.joined(separator: "\n")
        return """
            kafka:
              bootstrap.servers: \(servers)
            \(properties)
            consumer:
              topics: [notifications]
            topics:
              results: apns-results
              deadLetters: \(deadLetters)
            apns:
              credentials:
                - name: app
                  topics: [com.example.app]
                  token: { teamId: ABCDE12345, keyId: KEY1234567, keyFile: \(keyFile) }
            """ + (progressTopic.map { "\ndelivery:\n  progressTopic: \($0)\n" } ?? "")
    }

    static func keyFile() async throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("key-\(UUID().uuidString).p8").path
        let openssl = try await spawnAndAwait(
            "/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
        try #require(openssl.status == 0, "\(openssl.stderr)")
        return path
    }

    // Before: a token key of mode 0666 passed without a word.
    @Test("a private key readable by every user is a warning naming the file and the mode to set; 0600 is not")
    func worldReadableKey() async throws {
        let key = try await Self.keyFile()
        let path = try Self.write(Self.configuration(servers: "127.0.0.1:1", keyFile: key))
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: key)
        let open = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: .seconds(1))
        #expect(
            open.warnings.contains { $0.contains("\(key) is readable by every user of the machine: chmod 0400") },
            "\(open.warnings)")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        let closed = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: .seconds(1))
        #expect(!closed.warnings.contains { $0.contains("readable by every user") }, "\(closed.warnings)")
    }

    @Test("with every topic on the broker and the key readable: valid, and the summary redacts secrets")
    func valid() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["notifications", "apns-results", "apns-dead-letters"] {
            try cluster.createTopic(topic, partitions: 1)
        }
        let path = try Self.write(
            Self.configuration(servers: cluster.bootstrapServers, keyFile: try await Self.keyFile()))
        let check = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: Self.patience)
        #expect(check.isValid, "\(check.problems)")
        let summary = check.summary.joined(separator: "\n")
        #expect(summary.contains("sasl.password=<redacted>"))
        #expect(!summary.contains("hunter2"))
        #expect(summary.contains("every topic exists"))
    }

    @Test(
        "a topic missing on the broker, a key that cannot be read: each is a problem naming its key; nothing is created"
    )
    func problems() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["notifications", "apns-results"] { try cluster.createTopic(topic, partitions: 1) }
        let path = try Self.write(
            Self.configuration(
                servers: cluster.bootstrapServers, keyFile: "/nonexistent/AuthKey.p8", deadLetters: "dlq-typo"))
        let check = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: Self.patience)
        #expect(!check.isValid)
        #expect(
            check.problems.contains { $0.hasPrefix("\(path):8: topics.deadLetters: topic 'dlq-typo' does not exist") },
            "\(check.problems)")
        #expect(check.problems.contains { $0.contains("/nonexistent/AuthKey.p8") }, "\(check.problems)")
        let again = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: Self.patience)
        #expect(again.problems.contains { $0.contains("dlq-typo") }, "looking did not create it")
    }

    @Test("check finds out where done records are kept: the mock keeps commit metadata, Tansu drops it")
    func commitMetadataProbe() async throws {
        let key = try await Self.keyFile()
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["notifications", "apns-results", "apns-dead-letters"] {
            try cluster.createTopic(topic, partitions: 1)
        }
        let mock = await ConfigurationCheck.run(
            path: try Self.write(Self.configuration(servers: cluster.bootstrapServers, keyFile: key)), environment: [:],
            brokerTimeout: Self.patience)
        #expect(mock.summary.contains { $0.contains("the broker keeps commit metadata") }, "\(mock.summary)")

        let tansu = try await TansuBroker.start()
        defer { Task { await tansu.shutdown() } }
        for topic in ["notifications", "apns-results", "apns-dead-letters"] {
            try await tansu.createTopic(topic, partitions: 1)
        }
        let bare = await ConfigurationCheck.run(
            path: try Self.write(Self.configuration(servers: tansu.bootstrapServers, keyFile: key)), environment: [:],
            brokerTimeout: Self.patience)
        // run refuses to start there: a problem, saying what to create.
        #expect(
            bare.problems.contains {
                $0.contains("drops commit metadata") && $0.contains("set delivery.progressTopic")
            },
            "\(bare.problems)")

        let withTopic =
            Self.configuration(servers: tansu.bootstrapServers, keyFile: key)
            + "\ndelivery:\n  progressTopic: progress\n"
        let missing = await ConfigurationCheck.run(
            path: try Self.write(withTopic), environment: [:], brokerTimeout: Self.patience)
        #expect(
            missing.problems.contains { $0.contains(":15: delivery.progressTopic: topic 'progress' does not exist") },
            "\(missing.problems)")
        try await tansu.createTopic("progress", partitions: 1)
        let kept = await ConfigurationCheck.run(
            path: try Self.write(withTopic), environment: [:], brokerTimeout: Self.patience)
        #expect(kept.isValid, "\(kept.problems)")
        #expect(
            kept.summary.contains {
                $0.contains("drops commit metadata; what finishes above an event still waiting is kept in progress")
            }, "\(kept.summary)")
    }

    @Test(
        "strict: a broker that does not answer is a problem naming what the client met and what to check; plain check keeps it a note"
    )
    func strictUnreachable() async throws {
        let path = try Self.write(Self.configuration(servers: "127.0.0.1:1", keyFile: try await Self.keyFile()))
        let strict = await ConfigurationCheck.run(
            path: path, environment: [:], brokerTimeout: .seconds(2), strict: true, probesAPNs: false)
        #expect(!strict.isValid)
        let problem = try #require(strict.problems.first { $0.contains("did not answer") }, "\(strict.problems)")
        #expect(problem.contains("127.0.0.1:1"), "names the broker: \(problem)")
        #expect(problem.contains("Connection refused"), "says what the client met: \(problem)")
        #expect(problem.contains("check kafka.bootstrap.servers"), "says what to do: \(problem)")
        #expect(strict.problems.count == 1, "one line per problem: \(strict.problems)")
        let plain = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: .seconds(2))
        #expect(plain.isValid, "\(plain.problems)")
        #expect(plain.notes.contains { $0.contains("did not answer") && $0.contains("Connection refused") })
        // Before: a refused connection waited out the whole time-out (10 s by default) however
        // soon it was refused. A minute's time-out: it answers long before.
        let started = ContinuousClock.now
        let patient = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: .seconds(60))
        #expect(patient.notes.contains { $0.contains("Connection refused") }, "\(patient.notes)")
        #expect(ContinuousClock.now - started < .seconds(30), "gave up at once, not at its time-out")
    }

    @Test(
        "strict: a topic the worker produces to whose min.insync.replicas exceeds its replication factor is a problem")
    func strictReplication() async throws {
        let key = try await Self.keyFile()
        let tansu = try await TansuBroker.start()
        defer { Task { await tansu.shutdown() } }
        try await tansu.createTopic("notifications", partitions: 1, settings: ["min.insync.replicas": "3"])
        try await tansu.createTopic("apns-results", partitions: 2, settings: ["min.insync.replicas": "2"])
        try await tansu.createTopic("apns-dead-letters", partitions: 1, settings: ["min.insync.replicas": "1"])
        try await tansu.createTopic("progress", partitions: 1)
        let path = try Self.write(
            Self.configuration(servers: tansu.bootstrapServers, keyFile: key, progressTopic: "progress"))
        let strict = await ConfigurationCheck.run(
            path: path, environment: [:], brokerTimeout: Self.patience, strict: true, probesAPNs: false)
        #expect(
            strict.problems == [
                "topics.results: topic 'apns-results' has min.insync.replicas 2 but 1 replica: every produce with acks=all (the worker's) fails; lower min.insync.replicas to 1 or add replicas"
            ], "the input topic is only read; the dead-letter topic is fine")
        let plain = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: Self.patience)
        #expect(plain.isValid, "plain check does not ask: \(plain.problems)")
    }

    @Test("strict on a broker that does not answer DescribeConfigs (the mock cluster): says it could not check, valid")
    func strictCannotDescribe() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["notifications", "apns-results", "apns-dead-letters"] {
            try cluster.createTopic(topic, partitions: 1)
        }
        let path = try Self.write(
            Self.configuration(servers: cluster.bootstrapServers, keyFile: try await Self.keyFile()))
        let strict = await ConfigurationCheck.run(path: path, environment: [:], strict: true, probesAPNs: false)
        #expect(strict.isValid, "\(strict.problems)")
        #expect(
            strict.notes.contains { $0.hasPrefix("min.insync.replicas: could not check") }, "\(strict.notes)")
    }

    @Test(
        "strict over TLS and SASL: an untrusted CA, another host's certificate, no client certificate, a wrong password: each a problem saying what to check; the right settings pass"
    )
    func strictSecurity() async throws {
        let key = try await Self.keyFile()
        let material = try BrokerTLSMaterial()
        defer { material.remove() }
        let user = ProxySecurity.SASLPlain(username: "apns-worker", password: "right-password")
        let tansu = try await TansuBroker.start(
            security: ProxySecurity(
                tls: .init(server: material.server, clientCA: material.clientAuthority.certificate), sasl: user,
                admitsPlainClients: false))
        defer { Task { await tansu.shutdown() } }
        for topic in ["notifications", "apns-results", "apns-dead-letters", "progress"] {
            try await tansu.createTopic(topic, partitions: 1)
        }
        func strict(_ kafka: [String: String]) async throws -> ConfigurationCheck {
            let path = try Self.write(
                Self.configuration(
                    servers: tansu.bootstrapServers, keyFile: key, kafka: kafka, progressTopic: "progress"))
            return await ConfigurationCheck.run(
                path: path, environment: [:], brokerTimeout: .seconds(10), strict: true, probesAPNs: false)
        }
        let right = material.clientProperties(clientCertificate: true, sasl: user)
        let passes = try await strict(right)
        #expect(passes.isValid, "\(passes.problems)")
        #expect(passes.summary.contains { $0.contains("every topic exists") }, "\(passes.summary)")

        let tlsAdvice = "check kafka.ssl.ca.location"
        var stranger = right
        stranger["ssl.ca.location"] = try TestPEMDirectory().write(
            try TestCertificateAuthority(name: "Another CA"), as: "other-ca.pem")
        for (name, kafka, reason, advice) in [
            ("an untrusted CA", stranger, "certificate verify failed", tlsAdvice),
            (
                "no client certificate", material.clientProperties(clientCertificate: false, sasl: user),
                "certificate required", tlsAdvice
            ),
            (
                "a wrong password",
                material.clientProperties(
                    clientCertificate: true, sasl: .init(username: "apns-worker", password: "wrong-password")),
                "Authentication failed", "check kafka.sasl.mechanisms, kafka.sasl.username and kafka.sasl.password"
            ),
        ] {
            let check = try await strict(kafka)
            #expect(check.problems.count == 1, "\(name): \(check.problems)")
            let problem = check.problems.first ?? ""
            #expect(problem.contains("did not answer") && problem.contains(reason), "\(name): \(problem)")
            #expect(problem.contains(advice), "\(name): \(problem)")
            #expect(!problem.contains("password\""), "\(name): no secret in \(problem)")
            #expect(!problem.contains("wrong-password") && !problem.contains("right-password"), "\(name)")
        }
        try await tansu.proxy.setSecurity(
            ProxySecurity(
                tls: .init(server: material.otherHostServer, clientCA: material.clientAuthority.certificate), sasl: user
            ))
        let otherHost = try await strict(right)
        #expect(
            otherHost.problems.first.map { $0.contains("certificate verify failed") && $0.contains(tlsAdvice) } == true,
            "another host's certificate: \(otherHost.problems)")
    }

    @Test("a broker that does not answer is a note, not a problem; --offline checks the file alone")
    func unreachableAndOffline() async throws {
        let key = try await Self.keyFile()
        let path = try Self.write(Self.configuration(servers: "127.0.0.1:1", keyFile: key))
        let check = await ConfigurationCheck.run(path: path, environment: [:], brokerTimeout: .seconds(1))
        #expect(check.isValid, "\(check.problems)")
        #expect(check.notes.contains { $0.contains("did not answer") })
        let offline = await ConfigurationCheck.run(
            path: try Self.write(Self.configuration(servers: "127.0.0.1:1", keyFile: "/nonexistent.p8")),
            environment: [:],
            offline: true)
        #expect(offline.isValid)
        let broken = await ConfigurationCheck.run(
            path: try Self.write("kafka: {}\n"), environment: [:], offline: true)
        #expect(broken.problems.first?.contains("kafka.bootstrap.servers") == true, "\(broken.problems)")
    }
}
