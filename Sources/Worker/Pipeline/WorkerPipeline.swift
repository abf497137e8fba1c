import APNs
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import Synchronization
import Threading

/// The worker: consume → decode + validate → send → classify → retry → publish one result per
/// event (and a dead letter where the outcome table says so) → commit the done prefix.
///
/// At-least-once: an offset is committed only after the results of it and of everything before it
/// in its partition are acknowledged by Kafka. On SIGTERM (graceful shutdown) it stops reading,
/// lets in-flight events finish (bounded), commits, and leaves the group; a revocation does the same
/// for the partitions it takes away.
package final class WorkerPipeline: Service, Sendable {
    package let configuration: PipelineConfiguration
    private let consumerConfiguration: KafkaConsumerConfiguration
    private let producerConfiguration: KafkaProducerConfiguration
    private let processor: EventProcessor
    private let sender: any NotificationSending
    /// Every wait of an event (backoff, throttle, publish retry); cancelled once draining is over.
    private let scheduler: EventLoopDelayScheduler
    private let observer: any PipelineObserver
    private let logger: Logger
    let state: NIOLockedValueBox<StateMachine>
    private let consumerBox = NIOLockedValueBox<KafkaConsumer?>(nil)
    private let failure = NIOLockedValueBox<(any Error)?>(nil)
    /// The one committer's requests: finished events ask for a commit soon, revocations for one now.
    private let commits: CommitQueue
    /// Progress a revocation could not commit (it gave up, or the assignment was lost), by partition:
    /// if the group gives the partition back to this member, those records are not run again.
    private let owed = NIOLockedValueBox<[KafkaTopicPartition: (CommitCandidate, start: Int64)]>([:])
    /// Where the done records above committed offsets are kept: found out at the first commit that
    /// has any (does the broker give commit metadata back?).
    private let progressStore = NIOLockedValueBox(ProgressStore.unknown)
    /// `configuration.progressTopic`, for a broker that drops commit metadata.
    private let progressTopic: ProgressTopic?
    private let producerBox = NIOLockedValueBox<KafkaProducer?>(nil)
    /// Read by `publisherReported`: a report is applied as the publisher's state is then.
    private let publisherBox = NIOLockedValueBox<ResultPublisher?>(nil)
    /// Steps taken (records admitted, APNs answers, publish attempts), for liveness.
    private let progress = ProgressCounter()

    /// The producer while `run()` runs, for tests that make it fail.
    package var producerForTesting: KafkaProducer? { producerBox.withLockedValue { $0 } }

    /// The consumer while `run()` runs, for tests that look at what it fetches.
    package var consumerForTesting: KafkaConsumer? { consumerBox.withLockedValue { $0 } }

    package init(
        configuration: PipelineConfiguration, consumer: KafkaConsumerConfiguration,
        producer: KafkaProducerConfiguration,
        sender: any NotificationSending, decoder: NotificationEventDecoder = .standard,
        observer: any PipelineObserver = NoPipelineObserver(), logger: Logger = Logger(label: "apns-worker")
    ) {
        self.configuration = configuration
        self.consumerConfiguration = consumer
        self.producerConfiguration = producer
        self.sender = sender
        self.observer = observer
        self.logger = logger
        let scheduler = EventLoopDelayScheduler()
        self.scheduler = scheduler
        self.processor = EventProcessor(
            decoder: decoder, sender: sender, retryPolicy: configuration.retryPolicy, scheduler: scheduler,
            observer: observer, logger: logger, progress: progress, maxEventAge: configuration.maxEventAge,
            maxRecordBytes: configuration.maxRecordBytes)
        self.state = NIOLockedValueBox(
            StateMachine(
                maxInFlight: configuration.maxInFlight, maxInFlightBytes: configuration.maxInFlightBytes))
        self.commits = CommitQueue(spacing: configuration.commitInterval)
        self.progressTopic = configuration.progressTopic.map {
            ProgressTopic(topic: $0, group: consumer.groupID, consumer: consumer, logger: logger)
        }
    }

    /// Events consumed and not yet done.
    package var inFlight: Int { state.withLockedValue { $0.running } }

    /// Input partitions this member owns now (assigned, not being revoked).
    package var ownedPartitions: Int { state.withLockedValue { $0.owned.count } }

    package func run() async throws {
        let producer = try KafkaProducer(
            configuration: producerConfiguration, logger: logger,
            onFatalError: { [weak self] error in
                self?.logger.critical("the producer failed for good: \(error); stopping")
                self?.fail(error)
            })
        producerBox.withLockedValue { $0 = producer }
        // Their metadata now: else the first results after a start wait for it.
        producer.prepare(topics: [configuration.resultsTopic, configuration.deadLetterTopic])
        let publisher = ResultPublisher(
            producer: producer, scheduler: scheduler, observer: observer, logger: logger, progress: progress,
            report: { [weak self] report in self?.publisherReported(report) })
        publisherBox.withLockedValue { $0 = publisher }
        let rebalance = RebalanceBridge(pipeline: self)
        let observer = self.observer
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration, rebalanceHandler: rebalance,
            statisticsHandler: { observer.lag($0) }, stallHandler: { observer.partitionStall($0) },
            errorHandler: { observer.kafkaFailing($0) }, logger: logger)
        consumerBox.withLockedValue { $0 = consumer }
        // A stop begun before this (a fatal producer error as the producer starts) found no
        // consumer to close: close it now, or the reader would wait for records it must not take.
        if state.withLockedValue({ $0.isStopping }) {
            Task { await consumer.close() }
        } else {
            try consumer.subscribe(topics: configuration.inputTopics)
            logger.info(
                "consuming \(configuration.inputTopics.joined(separator: ", ")) as group \(consumerConfiguration.groupID)"
            )
        }

        // Cancelled (another service of the group failed): the same orderly stop as a signal.
        await withTaskCancellationHandler {
            await runUntilStopped(consumer: consumer, publisher: publisher)
        } onCancel: {
            self.beginShutdown()
        }
        await consumer.close()  // no-op after a graceful shutdown; leaves the group after a failure
        // Requests still in flight (a drain that timed out) end here; their results are published
        // if the producer still takes them, or abandoned.
        let budget = shutdownBudget()
        // Bounded: a black-holed APNs holds requests until their deadline, which may be later
        // than the budget's end. What is still open then goes with the process.
        let sender = self.sender
        let closedInTime = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let once = ResumeOnce(continuation)
            let timer = Task {
                guard (try? await Task.sleep(until: budget.end - .seconds(2), clock: .continuous)) != nil else {
                    return
                }
                once.resume(false)
            }
            Task {
                await sender.shutdown()
                timer.cancel()
                once.resume(true)
            }
        }
        if !closedInTime { logger.warning("APNs connections still closing at the end of the shutdown budget") }
        do {
            try await producer.flush(timeout: max(budget.end - .now, .seconds(1)))
        } catch {
            logger.error("results not acknowledged at shutdown: \(error)")
        }
        await producer.close(timeout: .seconds(1))
        if let error = failure.withLockedValue({ $0 }) {
            logger.critical("stopped after a failure: \(error)")
            throw error
        }
        logger.info("stopped")
    }

    private func runUntilStopped(consumer: KafkaConsumer, publisher: ResultPublisher) async {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.commitLoop(consumer: consumer) }
                group.addTask {
                    await self.ticker(consumer: consumer, producer: publisher.producer, publisher: publisher)
                }
                await readLoop(consumer, publisher: publisher)
                // The sequence ended: the consumer was closed (shutdown) or failed, and its
                // revocation drained (bounded) and committed what it could. What still runs gets
                // until the drain bound; what waits for a retry after that is abandoned
                // (uncommitted: read again by the partitions' next owner).
                let budget = shutdownBudget()
                await waitForDrain(of: nil, until: budget.drain)
                endAllLeases()
                scheduler.cancelAll()
                commits.finish()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.beginShutdown()
        }
    }

    /// Stops reading and leaves the group; the revocation inside `close()` drains and commits.
    /// Everything (drain, commit, the APNs pools, the producer's flush) is bounded by one deadline,
    /// `shutdownTimeout` from now.
    package func beginShutdown() {
        let (began, reader) = state.withLockedValue {
            $0.beginStopping(deadline: .now + configuration.shutdownTimeout)
        }
        guard began else { return }
        logger.info("shutting down: draining \(inFlight) in-flight events within \(configuration.shutdownTimeout)")
        reader?.resume()
        if let consumer = consumerBox.withLockedValue({ $0 }) {
            Task { await consumer.close() }
        }
    }

    /// Stops the worker after a failure that only a restart cures; `run()` then throws it.
    private func fail(_ error: any Error) {
        failure.withLockedValue { if $0 == nil { $0 = error } }
        beginShutdown()
    }

    var isStopping: Bool { state.withLockedValue { $0.isStopping } }

    /// Shutdown's one deadline, split: events may run until `drain`; the revocation's commit must be
    /// done by `commit`; the APNs pools and the producer's flush take the rest, up to `end`.
    struct ShutdownBudget {
        var drain: ContinuousClock.Instant
        var commit: ContinuousClock.Instant
        var end: ContinuousClock.Instant
    }

    private func shutdownBudget() -> ShutdownBudget {
        let end: ContinuousClock.Instant
        if let deadline = state.withLockedValue({ $0.deadline }) {
            end = deadline
        } else {
            end = .now + configuration.shutdownTimeout
        }
        let total = configuration.shutdownTimeout
        return ShutdownBudget(drain: end - total / 2, commit: end - total / 4, end: end)
    }

    // MARK: reading

    /// Records decoded before their requests go out together (see `readLoop`).
    static let readBatch = 64

    /// Reads and starts events; everything after the start runs on the sender's, the scheduler's
    /// and the producer's threads, through callbacks.
    ///
    /// Records are taken as they come, plus whatever else is already buffered (up to `readBatch`);
    /// their requests then go to the sender in one call, so that a connection's event loop is woken
    /// and writes once per batch rather than once per event. An idle stream still sends each event
    /// at once (a batch of one); a backlog costs at most a batch's decoding in latency.
    ///
    /// A record is admitted only under the lease of the tenure that fetched it (its partition's
    /// assignment then), checked when it is taken and again after any wait: a partition revoked or
    /// lost (and even assigned back) between the fetch and the admission is not this record's to run
    /// or commit any more. Its partition's current tenure reads it again.
    private func readLoop(_ consumer: KafkaConsumer, publisher: ResultPublisher) async {
        var records = consumer.messages.makeAsyncIterator()
        var requests: [NotificationRequest] = []
        requests.reserveCapacity(Self.readBatch)
        do {
            while var record = try await records.next() {
                HomeRelease.releaseHere()  // events that ended since the last batch, freed where decoded
                var taken = 1
                while true {
                    observer.consumed(topic: record.topic)
                    // The partition's lease and, unless the reader must wait first, the record's
                    // admission, in one hold of the lock (the producer's poll thread takes it for
                    // every acknowledged result).
                    let partition = record.topicPartition
                    let bytes = record.byteCount
                    let step = state.withLockedValue { state -> ReadStep in
                        guard let lease = state.lease(of: partition, readIn: record.tenure) else { return .notOwned }
                        guard !state.paused else { return .paused(lease) }
                        let action = state.admit(partition, offset: record.offset, lease: lease, bytes: bytes)
                        return .admitted(lease, action, running: state.running)
                    }
                    switch step {
                    case .notOwned:
                        break
                    case .admitted(let lease, let action, let running):
                        admitted(
                            record, bytes: bytes, lease: lease, action: action, running: running, sending: &requests,
                            publisher: publisher)
                    case .paused(let lease):
                        // The batch's requests first: the events that free the bound may be among them.
                        sendAll(&requests)
                        await waitWhilePaused()
                        HomeRelease.releaseHere()  // what ended while paused: not kept past the bound
                        admit(record, lease: lease, sending: &requests, publisher: publisher)
                    }
                    guard taken < Self.readBatch, let next = records.nextIfBuffered() else { break }
                    record = next
                    taken += 1
                }
                sendAll(&requests)
            }
        } catch {
            sendAll(&requests)
            logger.critical("the consumer failed: \(error); stopping")
            fail(error)
        }
    }

    /// What the reader found for a record, under the lock.
    private enum ReadStep {
        /// Its partition is not this member's, or not under the tenure that fetched it (revoked or lost
        /// since, perhaps assigned back): dropped unread.
        case notOwned
        /// Admitted (or skipped) under its partition's lease.
        case admitted(PartitionLease, StateMachine.AdmitAction, running: Int)
        /// The reader waits at the bound first, then admits it under this lease.
        case paused(PartitionLease)
    }

    /// Admits a record after a wait: its lease was taken when it was read.
    private func admit(
        _ record: KafkaConsumerMessage, lease: PartitionLease, sending requests: inout [NotificationRequest],
        publisher: ResultPublisher
    ) {
        let bytes = record.byteCount
        let (action, running) = state.withLockedValue { state in
            (state.admit(record.topicPartition, offset: record.offset, lease: lease, bytes: bytes), state.running)
        }
        admitted(
            record, bytes: bytes, lease: lease, action: action, running: running, sending: &requests,
            publisher: publisher)
    }

    /// After the lock: starts an admitted record.
    private func admitted(
        _ record: KafkaConsumerMessage, bytes: Int, lease: PartitionLease, action: StateMachine.AdmitAction,
        running: Int,
        sending requests: inout [NotificationRequest], publisher: ResultPublisher
    ) {
        if case .alreadyDone = action {
            // Its last owner published its result and recorded it as done: not pushed again.
            progress.step()
            observer.alreadyDone()
            commits.wantCommit()
            return
        }
        // Skipped: revoked meanwhile, or stopping. Uncommitted: its partition's owner reads it again.
        guard case .run(let holdsInput) = action else { return }
        progress.step()
        if holdsInput { observer.pausedChanged(true) }
        observer.inFlightChanged(running)
        start(record, bytes: bytes, lease: lease, sending: &requests, publisher: publisher)
    }

    private func sendAll(_ requests: inout [NotificationRequest]) {
        guard !requests.isEmpty else { return }
        sender.send(requests)
        requests.removeAll(keepingCapacity: true)
    }

    private func waitWhilePaused() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if state.withLockedValue({ $0.mayRead(continuation) }) { continuation.resume() }
        }
    }

    // MARK: one event

    /// Decodes the record here, then lets it run: send (its first request joins `requests`), retries,
    /// dead letter, result, `finish`.
    private func start(
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
        let (action, running) = state.withLockedValue { state in
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

    private func publisherReported(_ report: ResultPublisher.Report) {
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
        if let publisher = publisherBox.withLockedValue({ $0 }) { blocked = publisher.isBlocked(topic) }
        if blocked {
            if state.withLockedValue({ $0.block(topic, now: .now) }) { observer.pausedChanged(true) }
        } else {
            let action = state.withLockedValue { $0.unblock(topic) }
            if action.inputFlows { observer.pausedChanged(false) }
            action.resume?.resume()
        }
    }

    /// A topic that refuses every record for longer than `publishBlockedLimit` stops the worker
    /// (non-zero): work that can never be committed is not worth pushing, and a restart (or a
    /// human) is what it needs.
    private func checkBlockedTopics() {
        guard
            let (topic, since) = state.withLockedValue({
                $0.blockedLongest(now: .now, limit: configuration.publishBlockedLimit)
            })
        else { return }
        fail(PipelineError.outputTopicBlocked(topic: topic, for: since))
    }

    // MARK: drains and commits

    /// Waits until no event of these partitions (of any, for `nil`) is in flight, or the deadline.
    func waitForDrain(of partitions: Set<KafkaTopicPartition>?, until deadline: ContinuousClock.Instant) async {
        guard deadline > .now else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    if self.state.withLockedValue({ $0.waitForDrain(of: partitions, continuation) }) {
                        continuation.resume()
                    }
                }
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                let waiters = self.state.withLockedValue { $0.cancelDrainWait { $0 == partitions } }
                if !waiters.isEmpty {
                    self.logger.warning(
                        "\(waiters.count) drain wait(s) timed out; events still in flight will be read again")
                }
                for waiter in waiters { waiter.resume() }
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func endAllLeases() {
        for lease in state.withLockedValue({ $0.allLeases }) { lease.end() }
    }

    /// Every second: the blocked-topic limit, whether Kafka takes results, and liveness.
    private func ticker(consumer: KafkaConsumer, producer: KafkaProducer, publisher: ResultPublisher) async {
        var watch = ProgressWatch()
        var acknowledgement = AcknowledgementWatch()
        while !Task.isCancelled {
            guard (try? await Task.sleep(for: .seconds(1))) != nil else { return }
            checkBlockedTopics()
            let unacknowledged = producer.pendingCount
            switch acknowledgement.tick(acknowledged: publisher.acknowledged, unacknowledged: unacknowledged) {
            case .waiting(let seconds): observer.resultsWaiting(unacknowledged: unacknowledged, for: seconds)
            case .flowingAgain: observer.resultsAccepted()
            case .unchanged: break
            }
            let pending = state.withLockedValue { $0.running > 0 } || consumer.bufferedCount > 0
            let waitingForKafka = unacknowledged > 0 && producer.sincePolled <= watch.pollStall
            if watch.alive(
                steps: progress.value, pending: pending, sincePolled: consumer.sincePolled,
                waitingForKafka: waitingForKafka)
            {
                observer.heartbeat()
            }
        }
    }

    /// The only place offsets are committed: requests are served one at a time, so a commit
    /// computed earlier can never land after (and undo) a later one. Each commit carries, as the
    /// offset's metadata, the records above it that are done too (`CommitMetadata`).
    private func commitLoop(consumer: KafkaConsumer) async {
        // What the broker takes (its offset.metadata.max.bytes may be below the default).
        var metadataBudget = configuration.commitMetadataMaxBytes
        while let request = await commits.next() {
            let selection: Set<KafkaTopicPartition>?
            switch request {
            case .soon:
                selection = nil
                commits.commitStarting()
            case .partitions(let partitions, _): selection = partitions
            }
            let candidates = state.withLockedValue { $0.commitCandidates(in: selection) }
            var outcome = CommitQueue.Outcome.stored
            if !candidates.isEmpty {
                do {
                    try await consumer.commit(offsets(candidates, metadataBytes: metadataBudget))
                    try await keepProgress(candidates, consumer: consumer, metadataBytes: metadataBudget)
                    state.withLockedValue { $0.markCommitted(candidates) }
                    observer.committed(ok: true)
                } catch let error as KafkaError where error.code == .offsetMetadataTooLarge && metadataBudget > 0 {
                    observer.committed(ok: false)
                    outcome = .worthRetrying
                    metadataBudget = metadataBudget >= 128 ? metadataBudget / 2 : 0
                    logger.warning(
                        "the broker refuses this much commit metadata (its offset.metadata.max.bytes is lower); writing at most \(metadataBudget) bytes"
                    )
                    commits.retryLater()
                } catch {
                    observer.committed(ok: false)
                    let passing: Set<KafkaError.Code> = [
                        .notCoordinator, .coordinatorNotAvailable, .requestTimedOut, .timedOut, .transport,
                    ]
                    outcome =
                        (error as? KafkaError).map { passing.contains($0.code) } == true ? .worthRetrying : .refused
                    logger.warning("commit failed: \(error)")
                    commits.retryLater()
                }
            }
            if case .partitions(_, let done) = request { done(outcome) }
        }
    }

    /// After a commit: where the broker keeps no commit metadata, the done records go to the
    /// progress topic (and are stored before this returns). The first commit with done records
    /// finds out which broker this is.
    private func keepProgress(
        _ candidates: [CommitCandidate], consumer: KafkaConsumer, metadataBytes: Int
    ) async throws {
        guard let sample = candidates.first(where: { !$0.done.isEmpty }) else { return }
        var store = progressStore.withLockedValue { $0 }
        if store == .unknown {
            let stored = try await consumer.committed([sample.partition])[sample.partition]
            let kept =
                stored?.metadata.map { (try? CommitMetadata.decode($0, committed: sample.offset)) != nil } ?? false
            store = kept ? .commitMetadata : progressTopic == nil ? .none : .progressTopic
            progressStore.withLockedValue { $0 = store }
            observer.progressStore(store)
            switch store {
            case .commitMetadata, .unknown: break
            case .progressTopic:
                logger.info(
                    "the broker drops commit metadata: done records above committed offsets go to \(progressTopic?.topic ?? "")"
                )
            case .none:
                logger.warning(
                    "the broker drops commit metadata and delivery.progressTopic is not set: after a crash or a hand-over, events finished above one still waiting are pushed again"
                )
            }
        }
        guard store == .progressTopic, let progressTopic, let producer = producerBox.withLockedValue({ $0 }) else {
            return
        }
        let records = try await progressTopic.records(candidates, metadataBytes: metadataBytes)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for record in records {
                group.addTask { _ = try await producer.send(record) }
            }
            try await group.waitForAll()
        }
    }

    /// Where done records go to the progress topic (a broker that drops commit metadata, and refuses
    /// commits while its group rebalances, as Tansu 0.6 does): a revocation that could not commit
    /// still leaves what it finished there, said against the offset the broker has, so the next
    /// owner does not push it again. Best effort, bounded by `deadline`.
    private func keepProgressUncommitted(
        _ partitions: Set<KafkaTopicPartition>, until deadline: ContinuousClock.Instant
    ) async {
        guard progressStore.withLockedValue({ $0 }) == .progressTopic, let progressTopic,
            let producer = producerBox.withLockedValue({ $0 })
        else { return }
        let candidates = state.withLockedValue { $0.doneSinceLastStored(partitions) }
        guard !candidates.isEmpty else { return }
        let logger = self.logger
        let metadataBytes = configuration.commitMetadataMaxBytes
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = ResumeOnce(continuation)
            let timer = Task {
                guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
                once.resume(())
            }
            Task {
                do {
                    let records = try await progressTopic.records(candidates, metadataBytes: metadataBytes)
                    for record in records { _ = try await producer.send(record) }
                } catch {
                    logger.warning(
                        "could not keep the revoked partitions' done records in \(progressTopic.topic): \(error)")
                }
                timer.cancel()
                once.resume(())
            }
        }
    }

    /// The candidates as offsets to commit, each with its done records as metadata of at most
    /// `metadataBytes` (0: none).
    private func offsets(_ candidates: [CommitCandidate], metadataBytes: Int) -> [KafkaTopicPartitionOffset] {
        candidates.map { candidate in
            guard metadataBytes > 0 else {
                if !candidate.done.isEmpty { observer.commitMetadataOmitted(Int(candidate.done.count)) }
                return candidate.position
            }
            let (text, omitted) = CommitMetadata(committed: candidate.offset, done: candidate.done).encoded(
                maxBytes: metadataBytes)
            if omitted > 0 { observer.commitMetadataOmitted(Int(omitted)) }
            return KafkaTopicPartitionOffset(candidate.partition, offset: candidate.offset, metadata: text)
        }
    }

    fileprivate func revoked(_ partitions: [KafkaTopicPartition], lost: Bool) async {
        observer.partitionsRevoked(partitions)
        // Lost: the group threw this member out (it rejoins, and is ready again once assigned).
        if lost || isStopping { observer.consumerLeft() }
        let selection = Set(partitions)
        // Nothing of these partitions is pushed from now on: what waits for a retry is the next
        // owner's (released at once), what is at APNs finishes and counts.
        for lease in state.withLockedValue({ $0.revoke(partitions) }) {
            lease.handOver()
            scheduler.cancel(lease: lease)
        }
        let stopping = isStopping
        let budget = shutdownBudget()
        // A lost assignment may already be someone else's: nothing to wait for or commit.
        if !lost {
            await waitForDrain(
                of: selection, until: stopping ? budget.drain : .now + configuration.revocationTimeout)
            // Bounded: this runs while librdkafka's poll thread waits for it, and a commit can wait
            // for the very rebalance that waits for us (seen on the mock cluster: two members both
            // idle for minutes). Past the bound the partitions go uncommitted past their last
            // commit: their next owner reads those events again (duplicates, never losses).
            let bound = stopping ? max(budget.commit - .now, .zero) : configuration.revocationTimeout
            // Tried again (a commit refused while the group rebalances, a broker that allows less
            // metadata) until stored or the bound passes.
            let deadline = ContinuousClock.now + bound
            var outcome = CommitQueue.Outcome.worthRetrying
            while outcome == .worthRetrying, ContinuousClock.now < deadline, !commits.isFinished {
                outcome = await commitRevoked(selection, until: deadline)
                if outcome == .worthRetrying { try? await Task.sleep(for: .milliseconds(200)) }
            }
            let committed = outcome == .stored
            if !committed {
                observer.revocationCommitGaveUp()
                logger.warning(
                    "revocation: the commit was refused or not done within \(bound); letting the partitions go uncommitted"
                )
                await keepProgressUncommitted(selection, until: deadline + .seconds(2))
            }
        }
        // What is not stored (a lost assignment cannot commit; a revocation's commit may have given
        // up, or events finished after it): should the group give the partitions back to this
        // member, what was done here is not run again.
        let unsaved = state.withLockedValue { $0.unsaved(selection) }
        owed.withLockedValue { owed in
            for (candidate, start) in unsaved { owed[candidate.partition] = (candidate, start) }
        }
        // The partitions are gone: what of them still waits for a retry is abandoned at its next
        // step (their next owner pushes it), not pushed from here as well.
        for lease in state.withLockedValue({ $0.forget(partitions) }) { lease.end() }
    }

    /// One commit of revoked partitions, ahead of any other; `.refused` if not done by `deadline`.
    private func commitRevoked(
        _ partitions: Set<KafkaTopicPartition>, until deadline: ContinuousClock.Instant
    ) async -> CommitQueue.Outcome {
        await withCheckedContinuation { (continuation: CheckedContinuation<CommitQueue.Outcome, Never>) in
            let once = ResumeOnce(continuation)
            // Cancelled once the commit is done: no sleeping task outlives a quick revocation.
            let timer = Task {
                guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
                once.resume(.refused)
            }
            let done: @Sendable (CommitQueue.Outcome) -> Void = { outcome in
                timer.cancel()
                once.resume(outcome)
            }
            if !commits.commitNow(partitions, done: done) { done(.refused) }
        }
    }

    fileprivate func assigned(_ partitions: [KafkaTopicPartition], tenure: UInt64) async {
        observer.consumerJoined()
        // Bounded well inside the consumer's handler bound (max.poll.interval.ms): past that the poll
        // thread would go on, and records of the new tenure would reach the reader before their
        // lease exists. Too slow an answer only means its done records run again.
        let limit = min(.seconds(30), consumerConfiguration.maxPollInterval / 4)
        let progress = await withCheckedContinuation {
            (continuation: CheckedContinuation<[KafkaTopicPartition: KnownProgress], Never>) in
            let once = ResumeOnce(continuation)
            let timer = Task {
                guard (try? await Task.sleep(for: limit)) != nil else { return }
                self.logger.warning(
                    "the done records of \(partitions.count) assigned partition(s) were not read within \(limit); what their last owner finished above the committed offsets is pushed again"
                )
                once.resume([:])
            }
            Task {
                let known = await self.knownProgress(of: partitions)
                timer.cancel()
                once.resume(known)
            }
        }
        let ended = state.withLockedValue { $0.assign(partitions, tenure: tenure, progress: progress) }
        for lease in ended { lease.end() }
        if progress.values.contains(where: { !$0.done.isEmpty }) { commits.wantCommit() }
    }

    /// What the partitions' committed offsets say is done above them (their metadata), plus what this
    /// member finished there before a revocation, or a lost assignment, that could not commit it.
    /// Read before any record
    /// of the new assignment is admitted (the poll thread waits for the assignment's handler).
    private func knownProgress(of partitions: [KafkaTopicPartition]) async -> [KafkaTopicPartition: KnownProgress] {
        let owedHere = owed.withLockedValue { owed in
            var taken: [KafkaTopicPartition: (CommitCandidate, start: Int64)] = [:]
            for partition in partitions { taken[partition] = owed.removeValue(forKey: partition) }
            return taken
        }
        guard let consumer = consumerBox.withLockedValue({ $0 }) else { return [:] }
        let committed: [KafkaTopicPartition: KafkaTopicPartitionOffset]
        do {
            committed = try await consumer.committed(partitions)
        } catch {
            logger.warning(
                "could not read the committed offsets' metadata of \(partitions.count) partition(s): \(error); records their last owner finished above the committed offsets are pushed again"
            )
            return [:]
        }
        var fromTopic: [KafkaTopicPartition: OffsetRanges] = [:]
        let bare = committed.filter { $0.value.metadata == nil }.mapValues(\.offset)
        if let progressTopic, !bare.isEmpty, progressStore.withLockedValue({ $0 }) != .commitMetadata {
            do {
                fromTopic = try await progressTopic.read(committed: bare)
            } catch {
                logger.warning(
                    "could not read \(progressTopic.topic): \(error); records their last owner finished above the committed offsets are pushed again"
                )
            }
        }
        var progress: [KafkaTopicPartition: KnownProgress] = [:]
        for (partition, stored) in committed {
            var known = KnownProgress(committed: stored.offset, done: OffsetRanges())
            if let text = stored.metadata {
                do {
                    known.done = try CommitMetadata.decode(text, committed: stored.offset).done
                } catch {
                    logger.warning(
                        "\(partition): the committed offset's metadata is \(error); ignored, so every record from offset \(stored.offset) on is run"
                    )
                }
            }
            if let done = fromTopic[partition] { known.done = done }
            // This member's own unsaved progress, if the committed offset lies in what that tenure
            // read (a committed offset below it means the partition was read from elsewhere since:
            // reset, or a recreated topic, and those records are not the ones it finished).
            if let (candidate, start) = owedHere[partition], stored.offset >= start, candidate.offset > stored.offset {
                known.done.insert(stored.offset..<candidate.offset)
                for range in candidate.done.ranges { known.done.insert(range) }
            }
            progress[partition] = known
        }
        return progress
    }
}

/// Where a worker keeps the done records above its committed offsets.
package enum ProgressStore: String, Sendable, CaseIterable {
    /// Not known yet: nothing has been committed with done records above its offset.
    case unknown
    /// In the commits' metadata: the broker gives it back.
    case commitMetadata = "commit-metadata"
    /// The broker drops commit metadata: in `delivery.progressTopic`.
    case progressTopic = "progress-topic"
    /// The broker drops commit metadata and no progress topic is set: only the offsets count.
    case none
}

/// Why the pipeline stopped on its own.
package enum PipelineError: Error, CustomStringConvertible {
    /// An output topic refused every record for longer than `publishBlockedLimit`.
    case outputTopicBlocked(topic: String, for: Duration)

    package var description: String {
        switch self {
        case .outputTopicBlocked(let topic, let duration):
            return "\(topic) refused every record for \(duration); stopping so that a restart (or an operator) can act"
        }
    }
}

/// A continuation that the first of several racing parties resumes; the others find it spent.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: NIOLockedValueBox<CheckedContinuation<T, Never>?>

    init(_ continuation: CheckedContinuation<T, Never>) {
        self.continuation = NIOLockedValueBox(continuation)
    }

    func resume(_ value: T) {
        continuation.withLockedValue { spent in
            defer { spent = nil }
            return spent
        }?.resume(returning: value)
    }
}

/// The consumer's rebalance callbacks, into the pipeline.
private struct RebalanceBridge: KafkaRebalanceHandler {
    let pipeline: WorkerPipeline

    func partitionsAssigned(_ partitions: [KafkaTopicPartition], tenure: UInt64) async {
        await pipeline.assigned(partitions, tenure: tenure)
    }

    func partitionsRevoked(_ partitions: [KafkaTopicPartition], lost: Bool) async {
        await pipeline.revoked(partitions, lost: lost)
    }
}
