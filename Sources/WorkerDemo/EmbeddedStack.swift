import APNs
import APNsSimulator
import Crypto
import Foundation
import Kafka
import Logging
import Worker

/// The Kafka cluster an embedded stack runs on: librdkafka's mock cluster (the default), or a broker
/// a test started (the integration tests also run on Tansu).
package protocol EmbeddedKafkaCluster: Sendable {
    var bootstrapServers: String { get }
    func create(topic: String, partitions: Int) async throws
}

extension KafkaMockCluster: EmbeddedKafkaCluster {
    package func create(topic: String, partitions: Int) async throws {
        try createTopic(topic, partitions: partitions)
    }
}

/// The embedded default: librdkafka's mock cluster and the APNs simulator in this process, a signing
/// key made for the run and registered with the simulator, and a worker configuration pointing at
/// them. Used by `apns-worker demo` and `dev`, and by the end-to-end tests.
package final class EmbeddedStack: Sendable {
    package static let teamID = "DEMOTEAM01"
    package static let keyID = "DEMOKEY001"
    /// The demo app's bundle ID; its push-type topics (`.voip`, …) use the same credential.
    package static let bundleID = "com.example.demo"
    package static let inputTopic = "notifications"
    package static let resultsTopic = "notification-results"
    package static let deadLetterTopic = "notification-dead-letters"
    /// Done records above committed offsets, for a broker that drops commit metadata (Tansu).
    package static let progressTopic = "apns-worker-progress"

    package let cluster: any EmbeddedKafkaCluster
    /// The cluster when it is librdkafka's mock (which can inject broker faults).
    package var mockCluster: KafkaMockCluster? { cluster as? KafkaMockCluster }
    package let simulator: Simulator
    /// Holds the signing key and the simulator's CA; removed by `shutdown()`.
    package let directory: String
    package let keyFile: String
    /// The consumer group protocol the configurations made here use.
    package let groupProtocol: KafkaGroupProtocol

    private init(
        cluster: any EmbeddedKafkaCluster, simulator: Simulator, directory: String, keyFile: String,
        groupProtocol: KafkaGroupProtocol
    ) {
        self.cluster = cluster
        self.simulator = simulator
        self.directory = directory
        self.keyFile = keyFile
        self.groupProtocol = groupProtocol
    }

    /// Starts both peers. `partitions` is the input topic's partition count. `kafka`: a cluster to use
    /// instead of a new mock cluster (its topics are created here). `groupProtocol`: the consumer
    /// group protocol of the worker configurations made here.
    package static func start(
        partitions: Int = 4, kafka: (any EmbeddedKafkaCluster)? = nil, groupProtocol: KafkaGroupProtocol = .classic,
        logger: Logger
    ) async throws -> EmbeddedStack {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-worker-\(getpid())-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A fresh ES256 key, as Apple's .p8 files are (PKCS#8 PEM), readable by this user only.
        let key = P256.Signing.PrivateKey()
        let keyFile = directory + "/AuthKey_\(keyID).p8"
        guard
            FileManager.default.createFile(
                atPath: keyFile, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: keyFile])
        }

        var quiet = logger
        quiet.logLevel = .error
        let cluster = try kafka ?? KafkaMockCluster(brokers: 1, logger: quiet)
        // The broker owns a next-generation group's timings: short, as the classic groups' below.
        (cluster as? KafkaMockCluster)?.setConsumerGroupTimings(session: .seconds(6), heartbeat: .milliseconds(500))
        try await cluster.create(topic: inputTopic, partitions: partitions)
        try await cluster.create(topic: resultsTopic, partitions: partitions)
        try await cluster.create(topic: deadLetterTopic, partitions: 1)
        try await cluster.create(topic: progressTopic, partitions: 1)

        var configuration = SimulatorConfiguration(tls: .directory(directory + "/tls"))
        configuration.tokenKeys = [ProviderTokenKey(teamID: teamID, keyID: keyID, publicKey: key.publicKey)]
        configuration.threads = 1
        configuration.recordLimit = 100_000
        let simulator = try await Simulator.start(configuration)
        return EmbeddedStack(
            cluster: cluster, simulator: simulator, directory: directory, keyFile: keyFile, groupProtocol: groupProtocol
        )
    }

    /// The worker's configuration for this stack, as a user would write it. `apnsPort`: where the
    /// worker finds APNs, when not at the simulator itself (a proxy in front of it); `logging`: the
    /// `logging:` section's value.
    package func configurationText(
        group: String = "apns-worker-demo", maxInFlight: Int = 2000, apnsPort: Int? = nil,
        logging: String = "{ level: warning, format: text }"
    ) -> String {
        let apnsPort = apnsPort ?? simulator.port
        // A member that dies is only dropped when its session times out: keep that short here (Tansu
        // holds a join for half of it). Under the next-generation protocol the broker owns it (set on
        // the mock cluster at start).
        let groupSettings =
            groupProtocol == .classic
            ? "  properties: { session.timeout.ms: \"6000\", heartbeat.interval.ms: \"500\" }"
            : "  groupProtocol: consumer"
        return """
            kafka:
              bootstrap.servers: "\(cluster.bootstrapServers)"
            consumer:
              group: \(group)
              topics: [\(Self.inputTopic)]
            \(groupSettings)
            topics:
              results: \(Self.resultsTopic)
              deadLetters: \(Self.deadLetterTopic)
            apns:
              connectionsPerCredential: 2
              requestTimeout: 10s
              caFile: "\(directory)/tls/ca.pem"
              endpoints:
                production: { host: localhost, port: \(apnsPort) }
                development: { host: localhost, port: \(apnsPort) }
              credentials:
                - name: demo
                  topics: ["\(Self.bundleID)", "\(Self.bundleID).*"]
                  token: { teamId: \(Self.teamID), keyId: \(Self.keyID), keyFile: "\(keyFile)" }
            delivery:
              maxInFlight: \(maxInFlight)
              retry: { maxAttempts: 6, initialBackoff: 50ms, maxBackoff: 1s, maxRetryDuration: 1m }
              revocationTimeout: 10s
              shutdownTimeout: 10s
              progressTopic: \(Self.progressTopic)
            http: { host: 127.0.0.1, port: 0 }
            logging: \(logging)
            """
    }

    package func configuration(
        group: String = "apns-worker-demo", maxInFlight: Int = 2000, apnsPort: Int? = nil
    ) throws -> WorkerConfiguration {
        try WorkerConfiguration.parse(
            configurationText(group: group, maxInFlight: maxInFlight, apnsPort: apnsPort), file: "<embedded>")
    }

    /// Creates a broadcast channel for the demo app as a provider would: a channel-management request
    /// (`APNsChannelManager`, the stack's signing key, TLS verified against the simulator's CA) to
    /// the simulator's management listener. Returns the channel id APNs (the simulator) chose.
    package func createChannel(storagePolicy: APNsChannelManager.StoragePolicy = .noMessageStored) async throws
        -> String
    {
        var configuration = APNsClientConfiguration(
            environment: .production, host: "localhost", port: simulator.managementPort,
            tls: APNsTLSConfiguration(trust: .caFile(directory + "/tls/ca.pem")))
        configuration.requestTimeout = .seconds(10)
        let credential = APNsCredential.token(
            try APNsTokenAuthenticator(teamID: Self.teamID, keyID: Self.keyID, key: APNsSigningKey(file: keyFile)))
        let manager = try APNsChannelManager(configuration: configuration, credential: credential)
        do {
            let channel = try await manager.create(bundleID: Self.bundleID, storagePolicy: storagePolicy)
            await manager.shutdown()
            return channel.id
        } catch {
            await manager.shutdown()
            throw error
        }
    }

    package func shutdown() async {
        try? await simulator.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
