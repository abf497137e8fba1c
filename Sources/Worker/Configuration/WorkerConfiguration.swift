import Logging

/// Everything `apns-worker run` is configured with: the file (YAML or JSON) plus `APNS_WORKER_*`
/// environment overrides, typed and validated. docs/configuration.md documents every key.
///
/// Load it with `WorkerConfiguration.load(path:environment:)`; the defaults below are the ones
/// docs/configuration.md lists.
public struct WorkerConfiguration: Sendable {
    /// librdkafka properties for both the consumer and the producer (`bootstrap.servers` required).
    public var kafka: [String: String]
    public var consumer: ConsumerSettings
    public var producer: ProducerSettings
    public var topics: TopicSettings
    public var apns: APNsSettings
    public var delivery: DeliverySettings
    public var http: HTTPSettings
    public var logging: LoggingSettings

    public init(
        kafka: [String: String], consumer: ConsumerSettings, producer: ProducerSettings = ProducerSettings(),
        topics: TopicSettings, apns: APNsSettings, delivery: DeliverySettings = DeliverySettings(),
        http: HTTPSettings = HTTPSettings(), logging: LoggingSettings = LoggingSettings()
    ) {
        self.kafka = kafka
        self.consumer = consumer
        self.producer = producer
        self.topics = topics
        self.apns = apns
        self.delivery = delivery
        self.http = http
        self.logging = logging
    }

    /// `kafka.bootstrap.servers`.
    public var bootstrapServers: String { kafka["bootstrap.servers"] ?? "" }
}

/// `consumer:`
public struct ConsumerSettings: Sendable, Hashable {
    /// Consumer group id.
    public var group: String = "apns-worker"
    /// Input topics (at least one).
    public var topics: [String]
    /// Records handed over by librdkafka and not yet dispatched.
    public var bufferCapacity: Int = 2048
    /// The same bound in bytes (keys, values, headers).
    public var bufferBytes: Int = 32 * 1024 * 1024
    /// librdkafka properties for the consumer only (win over `kafka`).
    public var properties: [String: String] = [:]

    public init(topics: [String]) { self.topics = topics }
}

/// `producer:`
public struct ProducerSettings: Sendable, Hashable {
    /// A result or dead letter not acknowledged in this time is an error.
    public var deliveryTimeout: Duration = .seconds(300)
    /// librdkafka properties for the producer only (win over `kafka`).
    public var properties: [String: String] = [:]

    public init() {}
}

/// `topics:`
public struct TopicSettings: Sendable, Hashable {
    /// One result event per input event goes here.
    public var results: String
    public var deadLetters: String

    public init(results: String, deadLetters: String) {
        self.results = results
        self.deadLetters = deadLetters
    }
}

/// `delivery:`
public struct DeliverySettings: Sendable, Hashable {
    /// Events between consumed and result acknowledged; the consumer pauses at this, resumes at half.
    public var maxInFlight: Int = 2000
    /// The same bound in bytes of the in-flight events' records.
    public var maxInFlightBytes: Int = 64 * 1024 * 1024
    /// Period of offset commits (plus one at revocation and at shutdown).
    public var commitInterval: Duration = .seconds(1)
    /// `delivery.retry`: its defaults are `RetryPolicy`'s, as docs/configuration.md lists them.
    public var retry: RetryPolicy = RetryPolicy()
    /// How long a revoked partition's in-flight events may take before it is let go.
    public var revocationTimeout: Duration = .seconds(30)
    /// On SIGTERM everything (drain, commit, closing the APNs connections, flushing the producer)
    /// is done within this; the pod's termination grace period must be longer.
    public var shutdownTimeout: Duration = .seconds(30)
    /// An event whose record is older than this (its Kafka timestamp) ends `expired` unsent; `nil`
    /// (`0` in the file) turns the guard off.
    public var maxEventAge: Duration? = .seconds(6 * 3600)
    /// A record whose value is larger than this ends `invalid` (`recordTooLarge`) unsent.
    public var maxRecordBytes: Int = 256 * 1024
    /// An output topic refusing every record (unknown, not authorized) this long stops the worker.
    public var publishBlockedLimit: Duration = .seconds(300)

    public init() {}
}

/// `http:` — the operations endpoint.
public struct HTTPSettings: Sendable, Hashable {
    public var host: String = "0.0.0.0"
    /// 0 picks a free port (the server reports the real one).
    public var port: Int = 8080

    public init() {}
}

/// `logging:`
public struct LoggingSettings: Sendable, Hashable {
    public enum Format: String, Sendable, Hashable, CaseIterable {
        /// One JSON object per line (production).
        case json
        /// swift-log's stream handler (humans).
        case text
    }

    public var level: Logger.Level = .info
    public var format: Format = .json

    public init() {}
}
