import Kafka

/// The pipeline's reports, into Prometheus metrics and the health endpoints. One per lane: the
/// series that say which lane an event or an APNs answer was on carry `lane`.
package struct OperationsObserver: PipelineObserver {
    package let metrics: WorkerMetrics
    package let health: HealthState
    package let lane: WorkerMetrics.Lane

    package init(metrics: WorkerMetrics, health: HealthState, lane: WorkerMetrics.Lane = .bulk) {
        self.metrics = metrics
        self.health = health
        self.lane = lane
    }

    package func consumed(topic: String) { metrics.consumed(topic: topic) }

    package func completed(_ outcome: ResultOutcome, credential: String?, duration: Duration) {
        metrics.completed(outcome: outcome.rawValue, credential: credential)
        metrics.eventFinished(duration: duration, credential: credential, lane: lane)
        health.heartbeat()
    }

    package func deadLettered(_ reason: DeadLetterReason) { metrics.deadLettered(reason: reason.rawValue) }

    package func apnsAnswered(status: Int?, reason: String?, credential: String?, duration: Duration) {
        metrics.apnsRequest(
            status: status, reason: reason ?? "", credential: credential, lane: lane, duration: duration)
    }

    package func retryScheduled(_ cause: RetryCause) { metrics.retryScheduled(cause: cause.rawValue) }
    package func inFlightChanged(_ count: Int) { metrics.setInFlight(count) }
    package func parkedChanged(_ count: Int) { metrics.setParked(count) }
    package func inputHeldChanged(_ held: Bool) { metrics.setInputHeld(held) }
    package func committed(ok: Bool) { metrics.committed(success: ok) }
    package func alreadyDone() { metrics.alreadyDone() }
    package func doneRecordsRefused(_ refusal: DoneRecordBounds.Refusal) {
        metrics.doneRecordsRefused(reason: refusal.rawValue)
    }
    package func commitMetadataOmitted(_ offsets: Int) { metrics.commitMetadataOmitted(offsets) }
    package func revocationCommitGaveUp() { metrics.revocationCommitGaveUp() }
    package func progressStore(_ store: ProgressStore) { metrics.setProgressStore(store.rawValue) }
    package func consumerJoined() { health.markConsumerJoined() }
    package func consumerLeft() { health.markConsumerLeft() }
    package func kafkaFailing(_ error: KafkaError) {
        health.markKafkaFailed("\(error)", summary: error.code == .allBrokersDown)
    }

    package func partitionsRevoked(_ partitions: [KafkaTopicPartition]) {
        // A partition this member gave up must not keep reporting its last lag: the group's lag
        // would then never fall to zero on this pod's series.
        for partition in partitions {
            metrics.setConsumerLag(topic: partition.topic, partition: partition.partition, lag: 0)
        }
    }

    package func lag(_ statistics: KafkaConsumerStatistics) {
        for (partition, stats) in statistics.partitions {
            if let lag = stats.lag {
                metrics.setConsumerLag(topic: partition.topic, partition: partition.partition, lag: lag)
            }
        }
    }

    package func partitionStall(_ event: KafkaPartitionStall) {
        metrics.partitionStall(event)
    }

    package func credentialBroken(_ name: String, reason: String) {
        health.markCredentialBroken(name: name, reason: reason)
        metrics.setCredentialBroken(name, true)
    }

    package func credentialHealthy(_ name: String) {
        health.markCredentialHealthy(name: name)
        metrics.setCredentialBroken(name, false)
    }

    package func producerFailing(_ error: any Error) {
        if let error = error as? KafkaError, !error.isFatal {
            health.markResultsWaiting("\(error)")
        } else {
            health.markProducerFatal("\(error)")
        }
    }
    package func producerRecovered() {
        health.markProducerHealthy()
        metrics.setResultsWaiting(.zero)
    }
    package func resultsWaiting(unacknowledged: Int, for duration: Duration) {
        health.markResultsWaiting("\(unacknowledged) unacknowledged, none accepted for \(duration)")
        metrics.setResultsWaiting(duration)
    }
    package func resultsAccepted() {
        health.markProducerHealthy()
        metrics.setResultsWaiting(.zero)
    }
    package func publishedDegraded(topic: String, reason: String) {
        metrics.publishedDegraded(topic: topic, reason: reason)
    }
    package func heartbeat() { health.heartbeat() }
    package func traceContextIgnored(_ reason: TraceContext.Ignored) {
        metrics.traceContextIgnored(reason: reason.rawValue)
    }
}
