import APNs
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Synchronization
import Threading

/// One event from admission to done: started on the processor, its dead letter and result published,
/// then finished (the in-flight room and its offset given back); and what the publisher reports.
extension WorkerPipeline {
    // MARK: one event

    /// Decodes the record here, then lets it run: send (its first request joins `requests`), retries,
    /// dead letter, result, `finish`.
    func start(
        _ record: KafkaConsumerMessage, bytes: Int, lease: PartitionLease,
        sending requests: inout [NotificationRequest],
        publisher: ResultPublisher
    ) {
        let started = ContinuousClock.now
        let done = Done(partition: record.topicPartition, offset: record.offset, bytes: bytes, lease: lease)
        processor.process(record, lease: lease, sending: &requests) { result in
            guard let result else {
                self.finish(done, completed: false)
                return
            }
            self.publish(result, of: record, done: done, started: started, publisher: publisher)
        }
    }

    /// What `finish` needs of an event: where its offset is, what it weighs, under which lease.
    private struct Done: Sendable {
        let partition: KafkaTopicPartition
        let offset: Int64
        let bytes: Int
        let lease: PartitionLease
    }

    /// The dead letter first (if any), then the result: a result event is out only once its dead
    /// letter is stored. The offset counts as done once both are acknowledged.
    private func publish(
        _ result: EventResult, of record: KafkaConsumerMessage, done: Done,
        started: ContinuousClock.Instant, publisher: ResultPublisher
    ) {
        let completedAt = Date()
        let latency = ContinuousClock.now - started
        let message = ResultEvent.message(
            for: result, source: record, latency: latency, completedAt: completedAt, topic: configuration.resultsTopic)
        guard let deadLetterReason = result.deadLetter else {
            publishResult(
                message, of: result, record: record, latency: latency, completedAt: completedAt, done: done,
                started: started, publisher: publisher)
            return
        }
        let deadLetter = DeadLetterRecord.message(
            for: record, result: result, reason: deadLetterReason, consumerGroup: consumerConfiguration.groupID,
            topic: configuration.deadLetterTopic, now: completedAt)
        publisher.publish(deadLetter, degraded: .deadLetter(deadLetter, source: record)) { published in
            if published {
                self.publishResult(
                    message, of: result, record: record, latency: latency, completedAt: completedAt, done: done,
                    started: started, publisher: publisher)
            } else {
                self.finish(done, completed: false)
            }
        }
    }

    /// The result event, once its dead letter (if any) is stored.
    ///
    /// The callback keeps only what it needs (partition, offset, outcome), not the record and the
    /// result: each capture copies every reference they hold. The degraded form, for a record Kafka
    /// refuses as it is, needs them: they ride in the publisher's attempt until Kafka acknowledges.
    private func publishResult(
        _ message: KafkaProducerMessage, of result: EventResult, record: KafkaConsumerMessage, latency: Duration,
        completedAt: Date, done: Done, started: ContinuousClock.Instant, publisher: ResultPublisher
    ) {
        let outcome = result.outcome
        let credential = result.credential
        let deadLetterReason = result.deadLetter
        let resultsTopic = configuration.resultsTopic
        publisher.publish(
            message,
            degraded: .resultForm(
                of: result, source: record, latency: latency, completedAt: completedAt, topic: resultsTopic)
        ) { published in
            self.finish(done, completed: published)
            guard published else { return }
            if let deadLetterReason { self.observer.deadLettered(deadLetterReason) }
            self.observer.completed(outcome, credential: credential, duration: ContinuousClock.now - started)
        }
    }

    /// The event is done (`completed`) or abandoned (it stays uncommitted).
    private func finish(_ done: Done, completed: Bool) {
        let (action, running) = state.withLock { state in
            let action =
                completed
                ? state.finish(done.partition, offset: done.offset, lease: done.lease, bytes: done.bytes)
                : state.abandon(done.partition, offset: done.offset, lease: done.lease, bytes: done.bytes)
            return (action, state.running)
        }
        if completed { commits.wantCommit() }
        if action.inputFlows { observer.pausedChanged(false) }
        observer.inFlightChanged(running)
        action.resume?.resume()
        for waiter in action.drained { waiter.resume() }
    }

    // MARK: output topics

    func publisherReported(_ report: ResultPublisher.Report) {
        let topic: String
        switch report {
        case .fatal(let error):
            fail(error)
            return
        case .blocked(let refusing, let error):
            topic = refusing
            logger.error("\(topic) refuses every record (\(error)); input stops until it takes records again")
        case .unblocked(let taking):
            topic = taking
            logger.info("\(topic) takes records again; input resumes")
        }
        // Refusals (reported from the reader's, an event loop's or the scheduler's thread) and
        // acknowledgements (from the producer's poll thread) of one topic race, and their reports can
        // arrive here in the other order. Each is applied as the publisher's state is now, not as
        // the report says, so the last one applied leaves the pipeline agreeing with the publisher:
        // held while the topic is blocked, flowing once it is not.
        var blocked = true
        if case .unblocked = report { blocked = false }
        if let publisher = publisherBox.withLock({ $0 }) { blocked = publisher.isBlocked(topic) }
        if blocked {
            if state.withLock({ $0.block(topic, now: .now) }) { observer.pausedChanged(true) }
        } else {
            let action = state.withLock { $0.unblock(topic) }
            if action.inputFlows { observer.pausedChanged(false) }
            action.resume?.resume()
        }
    }

    /// A topic that refuses every record for longer than `publishBlockedLimit` stops the worker
    /// (non-zero): work that can never be committed is not worth pushing, and a restart (or a
    /// human) is what it needs.
    func checkBlockedTopics() {
        guard
            let (topic, since) = state.withLock({
                $0.blockedLongest(now: .now, limit: configuration.publishBlockedLimit)
            })
        else { return }
        fail(PipelineError.outputTopicBlocked(topic: topic, for: since))
    }
}
