import Foundation
import Kafka
import TestPeers
import Testing

/// librdkafka's TLS and SASL against a real endpoint: Tansu behind the proxy, which terminates TLS
/// (and checks client certificates) and answers SASL/PLAIN itself, as a broker's listener would.
@Suite("TLS and SASL to the broker", .timeLimit(.minutes(3)))
struct BrokerSecurityTests {
    static let user = ProxySecurity.SASLPlain(username: "apns-worker", password: "right-\(UUID().uuidString)")

    @Test(
        "a producer and a consumer with security.protocol SSL store and read records through TLS; a plain client is refused"
    )
    func tlsRoundTrip() async throws {
        try await withBroker(tls: { .init(server: $0.server) }) { tansu, material in
            try await roundTrip(tansu, material.clientProperties())
            let statistics = await tansu.proxy.currentStatistics
            #expect(statistics.tlsAccepted >= 2 && statistics.tlsRefused == 0, "\(statistics)")

            let refusal = try await firstError(tansu, [:])
            #expect(refusal.code == .transport, "\(refusal)")
            #expect(await tansu.proxy.currentStatistics.plainRefused >= 1)
        }
    }

    @Test("a broker certificate from a CA the client does not trust is refused: certificate verify failed")
    func untrustedAuthority() async throws {
        try await withBroker(tls: { .init(server: $0.strangerServer) }) { tansu, material in
            let refusal = try await firstError(tansu, material.clientProperties())
            Self.expectVerifyFailure(refusal)
            #expect(await tansu.proxy.currentStatistics.tlsAccepted == 0)
        }
    }

    @Test(
        "a broker certificate for another host name is refused: ssl.endpoint.identification.algorithm is https by default"
    )
    func otherHostName() async throws {
        #expect(KafkaPropertyReading.value(of: "ssl.endpoint.identification.algorithm", after: []) == "https")
        try await withBroker(tls: { .init(server: $0.otherHostServer) }) { tansu, material in
            let refusal = try await firstError(tansu, material.clientProperties())
            Self.expectVerifyFailure(refusal)
            // The same certificate without the host name check: accepted, so the name was the refusal.
            var unchecked = material.clientProperties()
            unchecked["ssl.endpoint.identification.algorithm"] = "none"
            try await roundTrip(tansu, unchecked)
        }
    }

    @Test("with mutual TLS, a client without a certificate is refused and one from the client CA is accepted")
    func mutualTLS() async throws {
        try await withBroker(tls: { .init(server: $0.server, clientCA: $0.clientAuthority.certificate) }) {
            tansu, material in
            let refusal = try await firstError(tansu, material.clientProperties())
            #expect(refusal.code.name == "_SSL" || refusal.code == .transport, "\(refusal)")
            let refused = await tansu.proxy.currentStatistics
            #expect(refused.tlsRefused >= 1 && refused.tlsAccepted == 0, "\(refused)")
            try await roundTrip(tansu, material.clientProperties(clientCertificate: true))
        }
    }

    @Test(
        "SASL/PLAIN: the right password stores and reads records over SASL_SSL; a wrong one is refused with the broker's reason"
    )
    func saslPlain() async throws {
        try await withBroker(tls: { .init(server: $0.server) }, sasl: Self.user) { tansu, material in
            try await roundTrip(tansu, material.clientProperties(sasl: Self.user))
            #expect(await tansu.proxy.currentStatistics.saslAuthenticated >= 2)

            let wrong = ProxySecurity.SASLPlain(username: Self.user.username, password: "wrong")
            let refusal = try await firstError(tansu, material.clientProperties(sasl: wrong))
            #expect(refusal.code.name == "_AUTHENTICATION", "\(refusal)")
            #expect(refusal.message.contains("SASL authentication error: Authentication failed"), "\(refusal)")
            #expect(!refusal.message.contains(Self.user.password) && !refusal.message.contains("wrong"))
            #expect(await tansu.proxy.currentStatistics.saslRefused >= 1)
        }
    }

    @Test("SASL/PLAIN over SASL_PLAINTEXT: the right password works, a client that skips SASL is refused")
    func saslPlaintext() async throws {
        try await withBroker(sasl: Self.user) { tansu, _ in
            let properties = [
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                "sasl.username": Self.user.username, "sasl.password": Self.user.password,
            ]
            try await roundTrip(tansu, properties)
            let refusal = try await firstError(tansu, [:])
            #expect(refusal.code == .transport, "\(refusal)")
        }
    }

    // MARK: Helpers

    /// librdkafka notices a failed verification in its handshake step (`_SSL`, "SSL handshake
    /// failed: …") or, a run in a few, in the read that carried the server's certificate
    /// (`_TRANSPORT`, "ssl://…: error:0A000086:…"): either way OpenSSL's reason is in the message.
    static func expectVerifyFailure(_ refusal: KafkaError) {
        #expect(refusal.code.name == "_SSL" || refusal.code == .transport, "\(refusal)")
        #expect(refusal.message.hasPrefix("ssl://127.0.0.1:"), "\(refusal)")
        #expect(refusal.message.contains("certificate verify failed"), "\(refusal)")
    }

    /// Tansu behind a proxy with this security (plain clients refused), and the test's certificates.
    func withBroker(
        tls: ((BrokerTLSMaterial) -> ProxySecurity.TLS)? = nil, sasl: ProxySecurity.SASLPlain? = nil,
        _ body: (TansuBroker, BrokerTLSMaterial) async throws -> Void
    ) async throws {
        let material = try BrokerTLSMaterial()
        defer { material.remove() }
        let tansu = try await TansuBroker.start(security: ProxySecurity(tls: tls?(material), sasl: sasl))
        do {
            try await body(tansu, material)
        } catch {
            await tansu.shutdown()
            throw error
        }
        await tansu.shutdown()
    }

    /// Produces 20 records to a new topic and reads them back as a group member, with `properties`.
    func roundTrip(_ tansu: TansuBroker, _ properties: [String: String]) async throws {
        let topic = uniqueName("secure")
        try await tansu.createTopic(topic, partitions: 2)
        var producerSettings = producerConfiguration(bootstrapServers: tansu.bootstrapServers)
        producerSettings.properties.merge(properties) { $1 }
        let producer = try KafkaProducer(configuration: producerSettings)
        for index in 0..<20 {
            _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("\(index)".utf8)))
        }
        await producer.close()
        var consumerSettings = consumerConfiguration(
            bootstrapServers: tansu.bootstrapServers, broker: .tansu, group: uniqueName("g"))
        consumerSettings.properties.merge(properties) { $1 }
        let consumer = try KafkaConsumer(configuration: consumerSettings)
        try consumer.subscribe(topics: [topic])
        let records = try await read(20, from: consumer, within: 60)
        await consumer.close()
        #expect(Set(records.map { String(decoding: $0.value ?? [], as: UTF8.self) }) == Set((0..<20).map(String.init)))
    }

    /// The first error a consumer with `properties` reports (its `errorHandler`) while joining.
    func firstError(_ tansu: TansuBroker, _ properties: [String: String]) async throws -> KafkaError {
        let errors = TestLocked<[KafkaError]>([])
        var settings = consumerConfiguration(
            bootstrapServers: tansu.bootstrapServers, broker: .tansu, group: uniqueName("refused"))
        settings.properties.merge(properties) { $1 }
        let consumer = try KafkaConsumer(
            configuration: settings, errorHandler: { error in errors.withLock { $0.append(error) } })
        try consumer.subscribe(topics: ["nothing-\(UUID().uuidString.prefix(6))"])
        let deadline = ContinuousClock.now + .seconds(20)
        // librdkafka 2.14 may say "all brokers down" before the error that says why: wait for that one.
        while errors.withLock({ !$0.contains { $0.code != .allBrokersDown } }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        await consumer.close()
        return try #require(errors.withLock { $0.first { $0.code != .allBrokersDown } }, "\(errors.withLock { $0 })")
    }
}
