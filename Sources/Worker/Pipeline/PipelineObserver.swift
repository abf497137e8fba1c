import Kafka

/// What the pipeline reports as it works: the operations layer turns these into metrics and
/// readiness. Every method has an empty default, so a test can observe only what it asserts on.
/// Called from many tasks at once: implementations must be thread-safe and quick.
public protocol PipelineObserver: Sendable {
    /// A record was read from an input topic.
    func consumed(topic: String)
    /// A result event (and its dead letter, if any) was acknowledged by Kafka.
    /// `credential`: the configured credential the event was sent with, `nil` when it never was.
    func completed(_ outcome: ResultOutcome, credential: String?, duration: Duration)
    func deadLettered(_ reason: DeadLetterReason)
    /// APNs answered (`status` nil: no answer, the request failed in transport).
    func apnsAnswered(status: Int?, reason: String?, duration: Duration)
    func retryScheduled(_ cause: RetryCause)
    func inFlightChanged(_ count: Int)
    func pausedChanged(_ paused: Bool)
    func committed(ok: Bool)
    func consumerJoined()
    /// The consumer lost its group membership (its assignment was lost) or left it (shutdown).
    func consumerLeft()
    func partitionsRevoked(_ partitions: [KafkaTopicPartition])
    func lag(_ statistics: KafkaConsumerStatistics)
    /// APNs refused this credential (403 InvalidProviderToken, BadCertificate, …).
    func credentialBroken(_ name: String, reason: String)
    /// A request with this credential succeeded again.
    func credentialHealthy(_ name: String)
    /// Results cannot be published (the producer failed); the pipeline keeps retrying.
    func producerFailing(_ error: any Error)
    func producerRecovered()
    /// A result or dead letter could not be stored as it was (`reason`: Kafka's error name); its
    /// degraded form was published instead.
    func publishedDegraded(topic: String, reason: String)
    /// The pipeline's loop is alive (called at least every few seconds, idle or not).
    func heartbeat()
}

extension PipelineObserver {
    public func consumed(topic: String) {}
    public func completed(_ outcome: ResultOutcome, credential: String?, duration: Duration) {}
    public func deadLettered(_ reason: DeadLetterReason) {}
    public func apnsAnswered(status: Int?, reason: String?, duration: Duration) {}
    public func retryScheduled(_ cause: RetryCause) {}
    public func inFlightChanged(_ count: Int) {}
    public func pausedChanged(_ paused: Bool) {}
    public func committed(ok: Bool) {}
    public func consumerJoined() {}
    public func consumerLeft() {}
    public func partitionsRevoked(_ partitions: [KafkaTopicPartition]) {}
    public func lag(_ statistics: KafkaConsumerStatistics) {}
    public func credentialBroken(_ name: String, reason: String) {}
    public func credentialHealthy(_ name: String) {}
    public func producerFailing(_ error: any Error) {}
    public func producerRecovered() {}
    public func publishedDegraded(topic: String, reason: String) {}
    public func heartbeat() {}
}

/// Observes nothing.
public struct NoPipelineObserver: PipelineObserver {
    public init() {}
}

/// Why an attempt is retried: the `cause` label of `apns_worker_retries_total`.
public enum RetryCause: String, Sendable, Hashable, CaseIterable {
    case tooManyRequests = "too-many-requests"
    case serverError = "server-error"
    case unavailable
    case transport
    case timeout
    case providerToken = "provider-token"
}
