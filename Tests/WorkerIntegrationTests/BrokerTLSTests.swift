import Foundation
import Logging
import ReliabilityMatrix
import TestPeers
import Testing
import Worker
import WorkerDemo

/// The worker's `kafka:` security properties against a real endpoint: Tansu behind the proxy, which
/// terminates TLS and SASL as a broker's listener would. The harness's own clients (producing the
/// input, reading the results) stay plain: the proxy admits them beside the worker.
@Suite("The worker's TLS and SASL to the broker", .serialized, .timeLimit(.minutes(5)))
struct BrokerTLSTests {
    @Test("through TLS (security.protocol SSL in kafka:) the worker pushes every event once and publishes every result")
    func tlsEndToEnd() async throws {
        let material = try BrokerTLSMaterial()
        defer { material.remove() }
        let harness = try await Harness.start(
            broker: .tansu, security: ProxySecurity(tls: .init(server: material.server), admitsPlainClients: true))
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.devices.policy = .accept
        try await harness.produce(
            (0..<300).map { Samples.alert(id: "tls-\($0)", deviceToken: Samples.deviceToken($0 + 1)) })

        let configuration = try Self.configuration(harness, kafka: material.clientProperties())
        let worker = try harness.startWorker { $0 = configuration }
        let results = try await harness.results(300)
        #expect(worker.assembly.health.readiness.isReady, "\(worker.assembly.health.readiness)")
        try await worker.stop()
        #expect(Set(results.compactMap(\.eventID)) == Set((0..<300).map { "tls-\($0)" }), "lost 0")
        #expect(results.allSatisfy { $0.outcome == .delivered })
        #expect(simulator.observation.repeatedAcceptances.ids == 0, "pushed twice 0")
        let statistics = await harness.tansu!.proxy.currentStatistics
        #expect(statistics.tlsAccepted >= 2 && statistics.tlsRefused == 0, "\(statistics)")
    }

    @Test(
        "a broker certificate the worker cannot verify (another CA, another host name): readiness red with the reason, logged, green once fixed",
        arguments: ["another CA", "another host name"])
    func unverifiableBroker(_ fault: String) async throws {
        let material = try BrokerTLSMaterial()
        defer { material.remove() }
        let broken = fault == "another CA" ? material.strangerServer : material.otherHostServer
        let harness = try await Harness.start(
            broker: .tansu, security: ProxySecurity(tls: .init(server: broken), admitsPlainClients: true))
        defer { Task { await harness.shutdown() } }
        let proxy = harness.tansu!.proxy
        var properties = material.clientProperties()
        // The fix is found within a second, not librdkafka's default 10 s back-off.
        properties["reconnect.backoff.max.ms"] = "1000"
        let configuration = try Self.configuration(harness, kafka: properties)
        let log = CapturedLog()
        let worker = try harness.startWorker(logger: log.logger(level: .warning)) { $0 = configuration }
        let health = worker.assembly.health

        try await eventually(30, "readiness red with the TLS reason", state: { health.readiness.kafka }) {
            health.readiness.kafka.contains("certificate verify failed")
        }
        // `_SSL` ("SSL handshake failed: …") or, a run in a few, `_TRANSPORT`: librdkafka names the
        // step that noticed; OpenSSL's reason is the same.
        let kafka = health.readiness.kafka
        #expect(kafka.hasPrefix("consumer has not joined its group; last Kafka error: Kafka error _"), "\(kafka)")
        #expect(kafka.contains("ssl://\(proxy.address)/bootstrap: "), "\(kafka)")
        #expect(!health.readiness.isReady)
        #expect(
            log.lines.contains { $0.contains("ssl://\(proxy.address)") && $0.contains("certificate verify failed") })
        // librdkafka keeps trying: more handshakes come, all refused.
        let refusedBefore = await proxy.currentStatistics.tlsRefused
        try await eventually(10, "another attempt") { await proxy.currentStatistics.tlsRefused > refusedBefore }

        try await proxy.setSecurity(ProxySecurity(tls: .init(server: material.server), admitsPlainClients: true))
        try await eventually(60, "readiness green once the certificate is right", state: { health.readiness.kafka }) {
            health.readiness.isReady
        }
        try await worker.stop()
    }

    @Test(
        "mutual TLS: the worker without a client certificate is refused with the reason; with ssl.certificate.location and ssl.key.location it joins"
    )
    func mutualTLS() async throws {
        let material = try BrokerTLSMaterial()
        defer { material.remove() }
        let security = ProxySecurity(
            tls: .init(server: material.server, clientCA: material.clientAuthority.certificate),
            admitsPlainClients: true)
        let harness = try await Harness.start(broker: .tansu, security: security)
        defer { Task { await harness.shutdown() } }

        let plain = try Self.configuration(harness, kafka: material.clientProperties(), group: "no-certificate")
        let without = try harness.startWorker { $0 = plain }
        let refused = without.assembly.health
        try await eventually(30, "readiness red with the reason", state: { refused.readiness.kafka }) {
            refused.readiness.kafka.contains("last Kafka error")
        }
        #expect(!refused.readiness.isReady)
        try await without.stop()

        let certified = try Self.configuration(
            harness, kafka: material.clientProperties(clientCertificate: true), group: "certificate")
        let with = try harness.startWorker { $0 = certified }
        try await eventually(60, "readiness green", state: { with.assembly.health.readiness.kafka }) {
            with.assembly.health.readiness.isReady
        }
        try await with.stop()
    }

    @Test("SASL/PLAIN over TLS: a wrong password is refused with the broker's reason in readiness; the right one joins")
    func saslPlain() async throws {
        let material = try BrokerTLSMaterial()
        defer { material.remove() }
        let user = ProxySecurity.SASLPlain(username: "apns-worker", password: "right-\(UUID().uuidString)")
        let security = ProxySecurity(tls: .init(server: material.server), sasl: user, admitsPlainClients: true)
        let harness = try await Harness.start(broker: .tansu, security: security)
        defer { Task { await harness.shutdown() } }

        let wrong = ProxySecurity.SASLPlain(username: user.username, password: "wrong-\(UUID().uuidString)")
        let log = CapturedLog()
        let wrongConfiguration = try Self.configuration(
            harness, kafka: material.clientProperties(sasl: wrong), group: "wrong-password")
        let refused = try harness.startWorker(logger: log.logger(level: .warning)) { $0 = wrongConfiguration }
        let health = refused.assembly.health
        try await eventually(30, "readiness red with the SASL reason", state: { health.readiness.kafka }) {
            health.readiness.kafka.contains("SASL authentication error")
        }
        #expect(health.readiness.kafka.contains("Authentication failed: invalid username or password"))
        #expect(!log.lines.contains { $0.contains(wrong.password) || $0.contains(user.password) }, "no password logged")
        try await refused.stop()

        let rightConfiguration = try Self.configuration(
            harness, kafka: material.clientProperties(sasl: user), group: "right-password")
        let right = try harness.startWorker { $0 = rightConfiguration }
        try await eventually(60, "readiness green", state: { right.assembly.health.readiness.kafka }) {
            right.assembly.health.readiness.isReady
        }
        try await right.stop()
        #expect(await harness.tansu!.proxy.currentStatistics.saslAuthenticated >= 2)
    }

    /// The stack's configuration with `kafka` added to its `kafka:` section, read as a file is (so
    /// librdkafka checks the properties as it does at start).
    static func configuration(_ harness: Harness, kafka: [String: String], group: String = "integration") throws
        -> WorkerConfiguration
    {
        let text = harness.stack.configurationText(group: group)
        let extra = kafka.sorted { $0.key < $1.key }.map { "\n  \($0.key): \"\($0.value)\"" }.joined()
        let marker = "bootstrap.servers: \"\(harness.stack.cluster.bootstrapServers)\""
        return try WorkerConfiguration.parse(text.replacingOccurrences(of: marker, with: marker + extra))
    }
}
