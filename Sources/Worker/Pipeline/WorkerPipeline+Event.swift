import APNs
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Synchronization
import Threading

/// One event from admission to done: its run started on the processor, its dead letter and result
/// published, then finished (the in-flight room and its offset given back); and what the publisher
/// reports.
extension WorkerPipeline {
    // MARK: one event

    /// Decodes the record here, then lets it run (`EventRun`): send (its first request joins
    /// `requests`), retries, dead letter, result, `finish`.
    func start(
        _ record: KafkaConsumerMessage, bytes: Int, lease: PartitionLease,
        sending requests: inout [NotificationRequest], outlet: Outlet
    ) {
        processor.process(
            record, bytes: bytes, lease: lease, started: .now, sending: &requests, outlet: outlet)
    }

    /// Where the pipeline's events end: the publisher, then `finish`. One for the reader's life.
    final class Outlet: EventOutlet {
        let pipeline: WorkerPipeline
        let publisher: ResultPublisher

        init(pipeline: WorkerPipeline, publisher: ResultPublisher) {
            self.pipeline = pipeline
            self.publisher = publisher
        }

        /// The dead letter goes first: a result event is out only once its dead letter is stored.
        func publishDeadLetter(of run: EventRun) {
            guard let reason = run.result.deadLetter else { preconditionFailure("a dead letter without a reason") }
            let configuration = pipeline.configuration
            let deadLetter = DeadLetterRecord.message(
                for: run.record, result: run.result, reason: reason,
                consumerGroup: pipeline.consumerConfiguration.groupID, topic: configuration.deadLetterTopic,
                now: run.completedAt ?? Date(), trace: run.span?.headers)
            publisher.publish(deadLetter, degraded: .deadLetter(deadLetter, source: run.record)) { publication in
                run.published(publication)
            }
        }

        /// The result event. The degraded form, for a record Kafka refuses as it is, keeps only
        /// what that form is made of: it rides in the publisher's attempt until Kafka acknowledges.
        func publishResult(of run: EventRun) {
            let completedAt = run.completedAt ?? Date()
            let latency = run.latency
            let topic = pipeline.configuration.resultsTopic
            let trace = run.span?.input ?? TraceContext(headers: run.record.headers)
            if let ignored = trace.ignored { pipeline.observer.traceContextIgnored(ignored) }
            // With span export, the worker's span: downstream continues the trace from the push.
            let carried = run.span?.headers ?? trace.headers
            let message = ResultRecord.message(
                for: run.result, source: run.record, latency: latency, completedAt: completedAt, topic: topic,
                trace: carried)
            publisher.publish(
                message,
                degraded: .resultForm(
                    of: run.result, source: run.record, latency: latency, completedAt: completedAt, topic: topic,
                    trace: carried)
            ) { publication in
                run.published(publication)
            }
        }

        func ended(_ run: EventRun, done: Bool) {
            run.span?.end(done: done, at: Date())
            pipeline.ended(run, done: done)
        }

        func mayBegin(_ run: EventRun) -> Bool {
            pipeline.mayBegin(run)
        }
    }

    // MARK: credential shares

    /// Runs `run` now, in its credential's share, or parks it (false) until one of its credential's
    /// running events ends (`CredentialShares`).
    private func mayBegin(_ run: EventRun) -> Bool {
        guard configuration.maxInFlightPerCredential != nil, let push = run.event?.push,
            let environment = run.event?.environment,
            let credential = processor.sender.credential(forTopic: push.topic, environment: environment)
        else { return true }
        let (parking, running, parked) = state.withLock { state in
            (state.begin(run, credential: credential), state.running, state.parked)
        }
        guard let parking else {
            run.shareCredential = credential
            return true
        }
        report(parking, running: running, parked: parked)
        return false
    }

    /// Gives up parked runs unsent: those whose partition was handed over or is gone, or (`all`,
    /// shutdown) every one. Uncommitted: the partition's owner reads them again.
    func abandonParked(all: Bool) {
        let (taken, running, parked) = state.withLock { state in
            (state.takeParked(all: all), state.running, state.parked)
        }
        guard !taken.runs.isEmpty else { return }
        report(taken.parking, running: running, parked: parked)
        for run in taken.runs { run.unparked(abandon: true) }
    }

    private func report(_ parking: StateMachine.Parking, running: Int, parked: Int) {
        observer.inFlightChanged(running)
        observer.parkedChanged(parked)
        if parking.action.holdEnded { observer.inputHeldChanged(false) }
        if parking.holdBegan { observer.inputHeldChanged(true) }
        parking.action.resume?.resume()
        for waiter in parking.action.drained { waiter.resume() }
    }

    /// The event ended: done (its result is stored) or abandoned (it stays uncommitted).
    private func ended(_ run: EventRun, done: Bool) {
        let partition = run.record.topicPartition
        let offset = run.record.offset
        let credential = run.shareCredential
        let (action, running, next, parked) = state.withLock { state in
            let action =
                done
                ? state.finish(partition, offset: offset, lease: run.lease, bytes: run.bytes)
                : state.abandon(partition, offset: offset, lease: run.lease, bytes: run.bytes)
            // Its place in its credential's share goes to the first event parked for it.
            let next = credential.map { state.leave($0) }
            return (action, state.running, next, state.parked)
        }
        if done { commits.wantCommit() }
        if action.holdEnded { observer.inputHeldChanged(false) }
        observer.inFlightChanged(running)
        action.resume?.resume()
        for waiter in action.drained { waiter.resume() }
        if let (nextRun, parking) = next, let nextRun {
            report(parking, running: running, parked: parked)
            nextRun.shareCredential = credential
            nextRun.unparked(abandon: false)
        }
        guard done else { return }
        if let reason = run.result.deadLetter { observer.deadLettered(reason) }
        observer.completed(run.result.outcome, credential: run.result.credential, duration: .now - run.started)
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
            if state.withLock({ $0.block(topic, now: .now) }) { observer.inputHeldChanged(true) }
        } else {
            let action = state.withLock { $0.unblock(topic) }
            if action.holdEnded { observer.inputHeldChanged(false) }
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
