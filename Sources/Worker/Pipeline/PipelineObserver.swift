import Kafka

/// What the pipeline reports as it works: the operations layer turns these into metrics and
/// readiness. Every method has an empty default, so a test can observe only what it asserts on.
/// Called from many tasks at once: implementations must be thread-safe and quick.
package protocol PipelineObserver: Sendable {
    /// A record was read from an input topic.
    func consumed(topic: String)
    /// A result event (and its dead letter, if any) was acknowledged by Kafka.
    /// `credential`: the configured credential the event was sent with, `nil` when it never was.
    func completed(_ outcome: ResultOutcome, credential: String?, duration: Duration)
    func deadLettered(_ reason: DeadLetterReason)
    /// APNs answered (`status` nil: no answer, the request failed in transport).
    func apnsAnswered(status: Int?, reason: String?, credential: String?, duration: Duration)
    func retryScheduled(_ cause: RetryCause)
    func inFlightChanged(_ count: Int)
    /// Events parked over their credential's share (read, not running, outside the in-flight count).
    func parkedChanged(_ count: Int)
    /// Input is held (`held`: the reader stops, at the in-flight bound or for a blocked output topic),
    /// or the hold ended and input flows again. Not librdkafka's partition pauses.
    func inputHeldChanged(_ held: Bool)
    func committed(ok: Bool)
    /// A record its partition's last owner had finished (the committed offset's metadata says so)
    /// was read again and not run: no second push, no second result.
    func alreadyDone()
    /// Done records read back at an assignment were refused (`DoneRecordBounds`).
    func doneRecordsRefused(_ refusal: DoneRecordBounds.Refusal)
    /// A commit's metadata had no room for this many done offsets (the highest): a crash before
    /// the next commit would push them again.
    func commitMetadataOmitted(_ offsets: Int)
    /// A revocation let its partitions go without its commit (Kafka did not answer in time): their
    /// next owner pushes again what was finished here since the last commit.
    func revocationCommitGaveUp()
    /// Found out where done records above committed offsets are kept (at the first commit with any).
    func progressStore(_ store: ProgressStore)
    func consumerJoined()
    /// librdkafka reported an error it retries itself while reaching Kafka: a broker refused or cut
    /// the connection, a TLS handshake or a SASL authentication failed.
    func kafkaFailing(_ error: KafkaError)
    /// The consumer lost its group membership (its assignment was lost) or left it (shutdown).
    func consumerLeft()
    func partitionsRevoked(_ partitions: [KafkaTopicPartition])
    func lag(_ statistics: KafkaConsumerStatistics)
    /// An input partition stopped reading while records wait (the consumer sought it again), or
    /// reads again.
    func partitionStall(_ event: KafkaPartitionStall)
    /// APNs refused this credential (403 InvalidProviderToken, BadCertificate, …).
    func credentialBroken(_ name: String, reason: String)
    /// A request with this credential succeeded again.
    func credentialHealthy(_ name: String)
    /// Results cannot be published (the producer failed); the pipeline keeps retrying unless the
    /// error is fatal.
    func producerFailing(_ error: any Error)
    func producerRecovered()
    /// Kafka has acknowledged no result for this long while these wait (librdkafka retries inside:
    /// a leaderless partition, NOT_ENOUGH_REPLICAS). Said every second while it lasts.
    func resultsWaiting(unacknowledged: Int, for: Duration)
    /// Kafka acknowledges results again after `resultsWaiting`.
    func resultsAccepted()
    /// A result or dead letter could not be stored as it was (`reason`: Kafka's error name); its
    /// degraded form was published instead.
    func publishedDegraded(topic: String, reason: String)
    /// The pipeline's loop is alive (called at least every few seconds, idle or not).
    func heartbeat()
    /// A consumed record's trace context was not carried (or its `tracestate` was dropped).
    func traceContextIgnored(_ reason: TraceContext.Ignored)
}

extension PipelineObserver {
    package func consumed(topic: String) {}
    package func completed(_ outcome: ResultOutcome, credential: String?, duration: Duration) {}
    package func deadLettered(_ reason: DeadLetterReason) {}
    package func apnsAnswered(status: Int?, reason: String?, credential: String?, duration: Duration) {}
    package func retryScheduled(_ cause: RetryCause) {}
    package func inFlightChanged(_ count: Int) {}
    package func parkedChanged(_ count: Int) {}
    package func inputHeldChanged(_ held: Bool) {}
    package func committed(ok: Bool) {}
    package func alreadyDone() {}
    package func doneRecordsRefused(_ refusal: DoneRecordBounds.Refusal) {}
    package func commitMetadataOmitted(_ offsets: Int) {}
    package func revocationCommitGaveUp() {}
    package func progressStore(_ store: ProgressStore) {}
    package func consumerJoined() {}
    package func kafkaFailing(_ error: KafkaError) {}
    package func consumerLeft() {}
    package func partitionsRevoked(_ partitions: [KafkaTopicPartition]) {}
    package func lag(_ statistics: KafkaConsumerStatistics) {}
    package func partitionStall(_ event: KafkaPartitionStall) {}
    package func credentialBroken(_ name: String, reason: String) {}
    package func credentialHealthy(_ name: String) {}
    package func producerFailing(_ error: any Error) {}
    package func producerRecovered() {}
    package func resultsWaiting(unacknowledged: Int, for: Duration) {}
    package func resultsAccepted() {}
    package func publishedDegraded(topic: String, reason: String) {}
    package func heartbeat() {}
    package func traceContextIgnored(_ reason: TraceContext.Ignored) {}
}

/// Observes nothing.
package struct NoPipelineObserver: PipelineObserver {
    package init() {}
}

/// Why an attempt is retried: the `cause` label of `apns_worker_retries_total`.
package enum RetryCause: String, Sendable, Hashable, CaseIterable {
    case tooManyRequests = "too-many-requests"
    case serverError = "server-error"
    case unavailable
    case transport
    case timeout
    case providerToken = "provider-token"
}
