import Kafka
import Threading

/// One lane's reports into the observer the lanes share (`consumer.lanes`): the worker runs a
/// pipeline per lane, and what the operator reads is still the worker's. Counts and events pass
/// through; what a lane reports as a state of the whole worker is combined across the lanes first:
/// events in flight (the sum), input held (either lane), the consumer joined (every lane's), results
/// waiting for Kafka (either lane's producer), and liveness: the worker beats once every lane has beaten
/// since its last beat, so a lane whose reader or poll thread sticks stops the worker's beats however
/// busy the other lane is (each lane beats when it is live or idle with nothing to do:
/// `LivenessWatch`).
///
/// A state is combined and passed on under one lock, so two lanes' reports reach `base` in the
/// order they were combined, never a stale sum after a fresh one.
package struct LaneObserver: PipelineObserver {
    /// What every lane last reported.
    package final class Tally: Sendable {
        struct Lanes {
            var inFlight: [Int]
            var parked: [Int]
            var held: [Bool]
            var joined: [Bool]
            var waiting: [Bool]
            /// Lanes that beat since the worker's last beat.
            var beaten: [Bool]
        }

        let lanes: Locked<Lanes>

        package init(lanes count: Int) {
            lanes = Locked(
                Lanes(
                    inFlight: Array(repeating: 0, count: count), parked: Array(repeating: 0, count: count),
                    held: Array(repeating: false, count: count),
                    joined: Array(repeating: false, count: count), waiting: Array(repeating: false, count: count),
                    beaten: Array(repeating: false, count: count)))
        }
    }

    let base: any PipelineObserver
    let lane: Int
    let tally: Tally

    /// - Parameter lane: this lane's index, below the count `tally` was made with.
    package init(base: any PipelineObserver, lane: Int, tally: Tally) {
        self.base = base
        self.lane = lane
        self.tally = tally
    }

    package func inFlightChanged(_ count: Int) {
        tally.lanes.withLock { lanes in
            lanes.inFlight[lane] = count
            base.inFlightChanged(lanes.inFlight.reduce(0, +))
        }
    }

    package func parkedChanged(_ count: Int) {
        tally.lanes.withLock { lanes in
            lanes.parked[lane] = count
            base.parkedChanged(lanes.parked.reduce(0, +))
        }
    }

    package func inputHeldChanged(_ held: Bool) {
        tally.lanes.withLock { lanes in
            lanes.held[lane] = held
            base.inputHeldChanged(lanes.held.contains(true))
        }
    }

    package func consumerJoined() {
        tally.lanes.withLock { lanes in
            lanes.joined[lane] = true
            if !lanes.joined.contains(false) { base.consumerJoined() }
        }
    }

    package func consumerLeft() {
        tally.lanes.withLock { lanes in
            lanes.joined[lane] = false
            base.consumerLeft()
        }
    }

    package func producerFailing(_ error: any Error) {
        tally.lanes.withLock { lanes in
            lanes.waiting[lane] = true
            base.producerFailing(error)
        }
    }

    package func resultsWaiting(unacknowledged: Int, for duration: Duration) {
        tally.lanes.withLock { lanes in
            lanes.waiting[lane] = true
            base.resultsWaiting(unacknowledged: unacknowledged, for: duration)
        }
    }

    package func producerRecovered() {
        tally.lanes.withLock { lanes in
            lanes.waiting[lane] = false
            if !lanes.waiting.contains(true) { base.producerRecovered() }
        }
    }

    package func resultsAccepted() {
        tally.lanes.withLock { lanes in
            lanes.waiting[lane] = false
            if !lanes.waiting.contains(true) { base.resultsAccepted() }
        }
    }

    // Counts and events: as they come.
    package func consumed(topic: String) { base.consumed(topic: topic) }
    package func completed(_ outcome: ResultOutcome, credential: String?, duration: Duration) {
        base.completed(outcome, credential: credential, duration: duration)
    }
    package func deadLettered(_ reason: DeadLetterReason) { base.deadLettered(reason) }
    package func traceContextIgnored(_ reason: TraceContext.Ignored) { base.traceContextIgnored(reason) }

    package func apnsAnswered(status: Int?, reason: String?, credential: String?, duration: Duration) {
        base.apnsAnswered(status: status, reason: reason, credential: credential, duration: duration)
    }
    package func retryScheduled(_ cause: RetryCause) { base.retryScheduled(cause) }
    package func committed(ok: Bool) { base.committed(ok: ok) }
    package func alreadyDone() { base.alreadyDone() }
    package func doneRecordsRefused(_ refusal: DoneRecordBounds.Refusal) { base.doneRecordsRefused(refusal) }
    package func commitMetadataOmitted(_ offsets: Int) { base.commitMetadataOmitted(offsets) }
    package func revocationCommitGaveUp() { base.revocationCommitGaveUp() }
    package func progressStore(_ store: ProgressStore) { base.progressStore(store) }
    package func kafkaFailing(_ error: KafkaError) { base.kafkaFailing(error) }
    package func partitionsRevoked(_ partitions: [KafkaTopicPartition]) { base.partitionsRevoked(partitions) }
    package func lag(_ statistics: KafkaConsumerStatistics) { base.lag(statistics) }
    package func partitionStall(_ event: KafkaPartitionStall) { base.partitionStall(event) }
    package func credentialBroken(_ name: String, reason: String) { base.credentialBroken(name, reason: reason) }
    package func credentialHealthy(_ name: String) { base.credentialHealthy(name) }
    package func publishedDegraded(topic: String, reason: String) {
        base.publishedDegraded(topic: topic, reason: reason)
    }
    /// Liveness: see the type's comment.
    package func heartbeat() {
        tally.lanes.withLock { lanes in
            lanes.beaten[lane] = true
            guard !lanes.beaten.contains(false) else { return }
            lanes.beaten = lanes.beaten.map { _ in false }
            base.heartbeat()
        }
    }
}
