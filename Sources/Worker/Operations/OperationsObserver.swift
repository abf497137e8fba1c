import Kafka

/// The pipeline's reports, into Prometheus metrics and the health endpoints.
public struct OperationsObserver: PipelineObserver {
    public let metrics: WorkerMetrics
    public let health: HealthState

    public init(metrics: WorkerMetrics, health: HealthState) {
        self.metrics = metrics
        self.health = health
    }

    public func consumed(topic: String) { metrics.consumed(topic: topic) }

    public func completed(_ outcome: ResultOutcome, credential: String?, duration: Duration) {
        metrics.completed(outcome: outcome.rawValue, credential: credential)
        metrics.eventFinished(duration: duration)
        health.heartbeat()
    }

    public func deadLettered(_ reason: DeadLetterReason) { metrics.deadLettered(reason: reason.rawValue) }

    public func apnsAnswered(status: Int?, reason: String?, duration: Duration) {
        metrics.apnsRequest(status: status, reason: reason ?? "", duration: duration)
    }

    public func retryScheduled(_ cause: RetryCause) { metrics.retryScheduled(cause: cause.rawValue) }
    public func inFlightChanged(_ count: Int) { metrics.setInFlight(count) }
    public func pausedChanged(_ paused: Bool) { metrics.setConsumerPaused(paused) }
    public func committed(ok: Bool) { metrics.committed(success: ok) }
    public func consumerJoined() { health.markConsumerJoined() }
    public func consumerLeft() { health.markConsumerLeft() }

    public func partitionsRevoked(_ partitions: [KafkaTopicPartition]) {
        // A partition this member gave up must not keep reporting its last lag: the group's lag
        // would then never fall to zero on this pod's series.
        for partition in partitions {
            metrics.setConsumerLag(topic: partition.topic, partition: partition.partition, lag: 0)
        }
    }

    public func lag(_ statistics: KafkaConsumerStatistics) {
        for (partition, stats) in statistics.partitions {
            if let lag = stats.consumerLag {
                metrics.setConsumerLag(topic: partition.topic, partition: partition.partition, lag: lag)
            }
        }
    }

    public func credentialBroken(_ name: String, reason: String) {
        health.markCredentialBroken(name: name, reason: reason)
        metrics.setCredentialBroken(name, true)
    }

    public func credentialHealthy(_ name: String) {
        health.markCredentialHealthy(name: name)
        metrics.setCredentialBroken(name, false)
    }

    public func producerFailing(_ error: any Error) { health.markProducerFatal("\(error)") }
    public func producerRecovered() { health.markProducerHealthy() }
    public func publishedDegraded(topic: String, reason: String) {
        metrics.publishedDegraded(topic: topic, reason: reason)
    }
    public func heartbeat() { health.heartbeat() }
}
