import Kafka
import Logging

/// Everything `apns-worker run` is configured with: the file (YAML or JSON) plus `APNS_WORKER_*`
/// environment overrides, typed and validated. docs/configuration.md documents every key.
///
/// Load it with `WorkerConfiguration.load(path:environment:)`; the defaults below are the ones
/// docs/configuration.md lists.
package struct WorkerConfiguration: Sendable {
    /// librdkafka properties for both the consumer and the producer (`bootstrap.servers` required).
    package var kafka: [String: String]
    package var consumer: ConsumerSettings
    package var producer: ProducerSettings
    package var topics: TopicSettings
    package var apns: APNsSettings
    package var delivery: DeliverySettings
    package var http: HTTPSettings
    package var logging: LoggingSettings
    /// Span export (`tracing:`); off unless `tracing.endpoint` is set.
    package var tracing = TracingSettings()

    package init(
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
    package var bootstrapServers: String { kafka["bootstrap.servers"] ?? "" }
}

/// `consumer:`
package struct ConsumerSettings: Sendable, Hashable {
    /// Consumer group id.
    package var group: String = Self.defaultGroup
    /// `consumer.group` when the file names none; replay's cursors are named after it too.
    package static let defaultGroup = "apns-worker"
    /// The consumer group protocol: `classic` (the default), or `consumer`, the next-generation one
    /// (KIP-848, Apache Kafka 4.0 and later), where the broker assigns and moves partitions one at a
    /// time and owns the session timeout, the heartbeat interval and the assignor.
    package var groupProtocol: KafkaGroupProtocol = .classic
    /// Input topics (at least one).
    package var topics: [String]
    /// Records handed over by librdkafka and not yet dispatched.
    package var bufferCapacity: Int = 2048
    /// The same bound in bytes (keys, values, headers).
    package var bufferBytes: Int = 16 * 1024 * 1024
    /// A partition fetching, unpaused, whose position has not moved for this long while the broker
    /// holds records beyond it is reported stalled and sought again; `nil` (`0` in the file) turns
    /// the watch off.
    package var stallAfter: Duration? = .seconds(60)
    /// librdkafka properties for the consumer only (win over `kafka`).
    package var properties: [String: String] = [:]
    /// `consumer.lanes.urgent`: input topics whose events never wait behind the others'; `nil`: one
    /// lane, every input topic alike.
    package var urgent: UrgentLane?

    package init(topics: [String]) { self.topics = topics }

    /// The input topics of the bulk lane: every one the urgent lane does not name.
    package var bulkTopics: [String] {
        guard let urgent else { return topics }
        return topics.filter { !urgent.topics.contains($0) }
    }
}

/// `consumer.lanes.urgent`: its topics are consumed by a group member of their own in the same
/// process and group (their own fetch queue and buffer), run under their own in-flight bound, and
/// are sent on APNs connections of their own, on an event-loop thread of their own.
package struct UrgentLane: Sendable, Hashable {
    package var topics: [String]
    /// Urgent events in flight at most, beside `delivery.maxInFlight`'s bulk ones.
    package var maxInFlight: Int = UrgentLane.defaultMaxInFlight
    package static let defaultMaxInFlight = 1000
    /// The lane's own APNs connections per credential (beside `apns.connectionsPerCredential`,
    /// the bulk lane's), all on one event-loop thread of their own.
    package var connectionsPerCredential: Int = 1

    package init(topics: [String]) { self.topics = topics }
}

/// `producer:`
package struct ProducerSettings: Sendable, Hashable {
    /// A result or dead letter not acknowledged in this time is an error.
    package var deliveryTimeout: Duration = .seconds(300)
    /// librdkafka properties for the producer only (win over `kafka`).
    package var properties: [String: String] = [:]

    package init() {}
}

/// `topics:`
package struct TopicSettings: Sendable, Hashable {
    /// One result event per input event goes here.
    package var results: String
    package var deadLetters: String

    package init(results: String, deadLetters: String) {
        self.results = results
        self.deadLetters = deadLetters
    }
}

/// `delivery:`
package struct DeliverySettings: Sendable, Hashable {
    /// Events between consumed and result acknowledged; input is held at this until half.
    /// Sized for APNs' real round trip (50 to 200 ms): throughput is at most this over the time an
    /// event stays in flight (docs/performance.md).
    package var maxInFlight: Int = 10_000
    /// The same bound in bytes of the in-flight events' records. 32 MiB keeps a worker of 64 KB
    /// events under 300 MB (each record also lives decoded, in its result and in the producer's
    /// queue); 300-byte events reach `maxInFlight` first.
    package var maxInFlightBytes: Int = 32 * 1024 * 1024
    /// Events of one credential running at most while others wait (fairness between apps: one in a
    /// 429 storm or on a dead connection holds no more); `nil`: half of `maxInFlight`. Applies with
    /// two credentials or more.
    package var maxInFlightPerCredential: Int?
    /// Events parked over their credential's share at most (outside `maxInFlight`); input is held at
    /// this until half. `nil`: `maxInFlight`.
    package var maxParked: Int?
    /// Finished events are committed at most this long after they finish (plus one at revocation and
    /// at shutdown). 50 ms costs no measurable CPU per event against 1 s (Benchmarks/archive/2026-11.md,
    /// "Commits soon after done, with the done records as metadata") and keeps what a crash re-sends
    /// down to what APNs had not answered.
    package var commitInterval: Duration = .milliseconds(50)
    /// `delivery.retry`: its defaults are `RetryPolicy`'s, as docs/configuration.md lists them.
    package var retry: RetryPolicy = RetryPolicy()
    /// How long a revoked partition's in-flight events may take before it is let go.
    package var revocationTimeout: Duration = .seconds(30)
    /// On SIGTERM everything (drain, commit, closing the APNs connections, flushing the producer)
    /// is done within this; the pod's termination grace period must be longer.
    package var shutdownTimeout: Duration = .seconds(30)
    /// An event whose record is older than this (its Kafka timestamp) ends `expired` unsent; `nil`
    /// (`0` in the file) turns the guard off.
    package var maxEventAge: Duration? = .seconds(6 * 3600)
    /// A record whose value is larger than this ends `invalid` (`recordTooLarge`) unsent.
    package var maxRecordBytes: Int = 256 * 1024
    /// An output topic refusing every record (unknown, not authorized) this long stops the worker.
    package var publishBlockedLimit: Duration = .seconds(300)
    /// A topic for the done records above committed offsets, used only when the broker drops commit
    /// metadata (Tansu 0.6 does; Apache Kafka and its services keep it).
    package var progressTopic: String?

    package init() {}

    /// The per-credential cap of a pipeline whose in-flight bound is `bound` (the urgent lane's is
    /// the same fraction of its own), with `credentials` configured; `nil`: no share (one
    /// credential, or a cap at the bound).
    /// A lane's bound of parked events: `maxParked` in the proportion of the lane's in-flight bound to
    /// `maxInFlight` (at least 1); `nil` when `maxParked` is not set (the lane's own in-flight bound).
    /// The ranges the file enforces keep the product far inside `Int`.
    package func parkedBound(forLaneOf laneMaxInFlight: Int) -> Int? {
        maxParked.map { max($0 * laneMaxInFlight / maxInFlight, 1) }
    }

    package func credentialCap(bound: Int, credentials: Int) -> Int? {
        guard credentials > 1 else { return nil }
        let fraction = Double(maxInFlightPerCredential ?? maxInFlight / 2) / Double(maxInFlight)
        let cap = max(Int((Double(bound) * fraction).rounded()), 1)
        return cap >= bound ? nil : cap
    }
}

/// `http:` — the operations endpoint.
package struct HTTPSettings: Sendable, Hashable {
    package var host: String = "0.0.0.0"
    /// 0 picks a free port (the server reports the real one).
    package var port: Int = 8080

    package init() {}
}

/// `logging:`
package struct LoggingSettings: Sendable, Hashable {
    package enum Format: String, Sendable, Hashable, CaseIterable {
        /// One JSON object per line (production).
        case json
        /// swift-log's stream handler (humans).
        case text
    }

    package var level: Logger.Level = .info
    package var format: Format = .json

    package init() {}
}
