import APNs
import Foundation
import Kafka
import Logging
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
    let consumerConfiguration: KafkaConsumerConfiguration
    /// `max.poll.interval.ms` as librdkafka runs with it (a property may set it over the typed default):
    /// the consumer's bound on a rebalance handler, which the handlers' own waits must stay within.
    let maxPollInterval: Duration
    private let producerConfiguration: KafkaProducerConfiguration
    let processor: EventProcessor
    private let sender: any NotificationSending
    /// Every wait of an event (backoff, throttle, publish retry); cancelled once draining is over.
    let scheduler: EventLoopDelayScheduler
    let observer: any PipelineObserver
    let logger: Logger
    let state: Locked<StateMachine>
    let consumerBox = Locked<KafkaConsumer?>(nil)
    private let failure = Locked<(any Error)?>(nil)
    /// The one committer's requests: finished events ask for a commit soon, revocations for one now.
    let commits: CommitQueue
    /// Where the done records above committed offsets are kept: found out at the first commit that
    /// has any (does the broker give commit metadata back?).
    let progressStore = Locked(ProgressStore.unknown)
    /// `configuration.progressTopic`, for a broker that drops commit metadata.
    let progressTopic: ProgressTopic?
    let producerBox = Locked<KafkaProducer?>(nil)
    /// Read by `publisherReported`: a report is applied as the publisher's state is then.
    let publisherBox = Locked<ResultPublisher?>(nil)
    /// Steps taken (records admitted, APNs answers, publish attempts), for liveness.
    let steps = StepCounter()
    /// The other lanes' pipelines (`PipelineLanes`): a stop of this one begins theirs; and where
    /// the lanes wait for each other before leaving the group.
    private let siblings = Locked<(pipelines: [Weak], barrier: LeaveBarrier?)>(([], nil))

    private struct Weak {
        weak var pipeline: WorkerPipeline?
    }

    /// The producer while `run()` runs, for tests that make it fail.
    package var producerForTesting: KafkaProducer? { producerBox.withLock { $0 } }

    /// The consumer while `run()` runs, for tests that look at what it fetches.
    package var consumerForTesting: KafkaConsumer? { consumerBox.withLock { $0 } }

    /// Tests: called by the commit loop after each step of a commit (`onCommitStepForTesting`).
    let commitStepForTesting = Locked<(@Sendable (CommitStep) async -> Void)?>(nil)

    package init(
        configuration: PipelineConfiguration, consumer: KafkaConsumerConfiguration,
        producer: KafkaProducerConfiguration,
        sender: any NotificationSending, decoder: NotificationEventDecoder = .standard,
        observer: any PipelineObserver = NoPipelineObserver(), logger: Logger = Logger(label: "apns-worker")
    ) {
        self.configuration = configuration
        self.consumerConfiguration = consumer
        self.maxPollInterval = consumer.effective.maxPollInterval
        self.producerConfiguration = producer
        self.sender = sender
        self.observer = observer
        self.logger = logger
        let scheduler = EventLoopDelayScheduler()
        self.scheduler = scheduler
        self.processor = EventProcessor(
            decoder: decoder, sender: sender, retryPolicy: configuration.retryPolicy, scheduler: scheduler,
            observer: observer, logger: logger, steps: steps, maxEventAge: configuration.maxEventAge,
            maxRecordBytes: configuration.maxRecordBytes,
            spans: configuration.tracer.map {
                EventSpans(
                    tracer: $0, parent: configuration.traceParent, consumerGroup: consumer.groupID,
                    lane: configuration.urgent ? "urgent" : "bulk")
            })
        self.state = Locked(
            StateMachine(
                maxInFlight: configuration.maxInFlight, maxInFlightBytes: configuration.maxInFlightBytes,
                maxParked: configuration.maxParked, shareCap: configuration.maxInFlightPerCredential))
        self.commits = CommitQueue(spacing: configuration.commitInterval)
        self.progressTopic = configuration.progressTopic.map {
            ProgressTopic(topic: $0, group: consumer.groupID, consumer: consumer, logger: logger)
        }
    }

    /// Events consumed and not yet done.
    package var inFlight: Int { state.withLock { $0.running } }

    /// A stop has begun (a graceful shutdown, a failure, another lane's stop).
    package var isStopping: Bool { state.withLock { $0.isStopping } }

    /// From now on a stop of this pipeline begins the stop of `others` too, and its consumer leaves
    /// the group only once every lane has drained and committed (or `barrier`'s wait ends).
    func stopsWith(_ others: [WorkerPipeline], barrier: LeaveBarrier) {
        siblings.withLock { $0 = (others.map { Weak(pipeline: $0) }, barrier) }
    }

    /// Input partitions this member owns now (assigned, not being revoked).
    package var ownedPartitions: Int { state.withLock { $0.owned.count } }

    package func run() async throws {
        // Before anything is read: where done records are kept decides whether pushing once holds.
        // A stop while the broker does not answer ends the wait (a signal, another service's failure).
        let found = try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                try await findProgressStore()
            } onGracefulShutdown: {
                self.beginShutdown()
            }
        } onCancel: {
            self.beginShutdown()
        }
        guard let store = found else {
            logger.info("stopped before starting")
            return
        }
        progressStore.withLock { $0 = store }
        observer.progressStore(store)
        let producer = try KafkaProducer(
            configuration: producerConfiguration, logger: logger,
            onFatalError: { [weak self] error in
                self?.logger.critical("the producer failed for good: \(error); stopping")
                self?.fail(error)
            })
        producerBox.withLock { $0 = producer }
        // Their metadata now: else the first results after a start wait for it, and the first
        // progress record the commit loop waits for (0.3 to 0.8 s on Tansu, during which a crash
        // loses all this lane finished since its start).
        var prepared = [configuration.resultsTopic, configuration.deadLetterTopic]
        if let progressTopic = configuration.progressTopic { prepared.append(progressTopic) }
        producer.prepare(topics: prepared)
        // The urgent lane's first event must not wait for APNs handshakes (the bulk lane's open at
        // its first events, which a backlog does not feel).
        if configuration.urgent { sender.connect() }
        let publisher = ResultPublisher(
            producer: producer, scheduler: scheduler, observer: observer, logger: logger, steps: steps,
            report: { [weak self] report in self?.publisherReported(report) })
        publisherBox.withLock { $0 = publisher }
        let rebalance = RebalanceBridge(pipeline: self)
        let observer = self.observer
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration, rebalanceHandler: rebalance,
            statisticsHandler: { observer.lag($0) }, stallHandler: { observer.partitionStall($0) },
            errorHandler: { observer.kafkaFailing($0) }, logger: logger)
        consumerBox.withLock { $0 = consumer }
        // A stop begun before this (a fatal producer error as the producer starts) found no
        // consumer to close: close it now, or the reader would wait for records it must not take.
        if state.withLock({ $0.isStopping }) {
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
        let closedInTime = await ResumeOnce<Bool>.first(
            of: {
                await sender.shutdown()
                return true
            }, orAfter: budget.end - .seconds(2) - .now, timedOut: false)
        if !closedInTime { logger.warning("APNs connections still closing at the end of the shutdown budget") }
        do {
            try await producer.flush(timeout: max(budget.end - .now, .seconds(1)))
        } catch {
            logger.error("results not acknowledged at shutdown: \(error)")
        }
        await producer.close(timeout: .seconds(1))
        if let error = failure.withLock({ $0 }) {
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
                abandonParked(all: true)
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
        let (began, reader) = state.withLock {
            $0.beginStopping(deadline: .now + configuration.shutdownTimeout)
        }
        guard began else { return }
        logger.info("shutting down: draining \(inFlight) in-flight events within \(configuration.shutdownTimeout)")
        reader?.resume()
        // Parked events were never sent: given up now, uncommitted, for the next owner to push.
        abandonParked(all: true)
        let (others, barrier) = siblings.withLock { $0 }
        let consumer = consumerBox.withLock { $0 }
        if let barrier {
            // Lanes: drain and commit while every lane is still a member, then leave.
            let deadline = shutdownBudget().commit
            Task {
                if consumer != nil { await commitBeforeLeaving() }
                await barrier.arrive(until: deadline)
                await consumer?.close()
            }
        } else if let consumer {
            Task { await consumer.close() }
        }
        for other in others { other.pipeline?.beginShutdown() }
    }

    /// Stops the worker after a failure that only a restart cures; `run()` then throws it.
    func fail(_ error: any Error) {
        failure.withLock { if $0 == nil { $0 = error } }
        beginShutdown()
    }

    /// Shutdown's one deadline, split: events may run until `drain`; the revocation's commit must be
    /// done by `commit`; the APNs pools and the producer's flush take the rest, up to `end`.
    struct ShutdownBudget {
        var drain: ContinuousClock.Instant
        var commit: ContinuousClock.Instant
        var end: ContinuousClock.Instant
    }

    /// A part of the shutdown budget.
    enum BudgetPart {
        case drain, commit, end
    }

    /// `deadline`, or the shutdown budget's `part` once a stop has begun, whichever comes first: a
    /// revocation's or an assignment's own bound never outlasts a shutdown begun meanwhile.
    func deadline(_ deadline: ContinuousClock.Instant, orShutdown part: BudgetPart) -> ContinuousClock.Instant {
        guard isStopping else { return deadline }
        let budget = shutdownBudget()
        let limit =
            switch part {
            case .drain: budget.drain
            case .commit: budget.commit
            case .end: budget.end
            }
        return min(deadline, limit)
    }

    /// Sleeps until `deadline(deadline, orShutdown: part)`, which a stop begun during the sleep brings
    /// forward (looked at every 250 ms). False when the task is cancelled first.
    func sleep(until deadline: ContinuousClock.Instant, orShutdown part: BudgetPart) async -> Bool {
        while true {
            let limit = self.deadline(deadline, orShutdown: part)
            let now = ContinuousClock.now
            guard now < limit else { return true }
            let slice = min(limit, now + .milliseconds(250))
            guard (try? await Task.sleep(until: slice, clock: .continuous)) != nil else { return false }
        }
    }

    func shutdownBudget() -> ShutdownBudget {
        let end: ContinuousClock.Instant
        if let deadline = state.withLock({ $0.deadline }) {
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
    /// A record is admitted only under the lease its partition had when the record was fetched
    /// (matched through the record's `tenure`), checked when it is taken and again after any wait: a
    /// partition revoked or lost (and even assigned back) between the fetch and the admission is not
    /// this record's to run or commit any more. Its partition's current lease reads it again.
    private func readLoop(_ consumer: KafkaConsumer, publisher: ResultPublisher) async {
        var records = consumer.messages.makeAsyncIterator()
        var requests: [NotificationRequest] = []
        requests.reserveCapacity(Self.readBatch)
        let outlet = Outlet(pipeline: self, publisher: publisher)
        do {
            while var record = try await records.next() {
                HomeRelease.releaseHere()  // events that ended since the last batch, freed where decoded
                var taken = 1
                while true {
                    observer.consumed(topic: record.topic)
                    // The partition's lease and, unless input is held, the record's admission, under
                    // one acquisition of the lock (the producer's poll thread takes it for every
                    // acknowledged result).
                    let partition = record.topicPartition
                    let bytes = record.byteCount
                    let step = state.withLock { state -> ReadStep in
                        guard let lease = state.lease(of: partition, readIn: record.tenure) else { return .notOwned }
                        guard !state.inputHeld else { return .held(lease) }
                        let action = state.admit(partition, offset: record.offset, lease: lease, bytes: bytes)
                        return .admitted(lease, action, running: state.running)
                    }
                    switch step {
                    case .notOwned:
                        break
                    case .admitted(let lease, let action, let running):
                        applyAdmission(
                            record, bytes: bytes, lease: lease, action: action, running: running, sending: &requests,
                            outlet: outlet)
                    case .held(let lease):
                        // The batch's requests first: the events that free the bound may be among them.
                        sendAll(&requests)
                        await waitWhileHeld()
                        HomeRelease.releaseHere()  // what ended while held: not kept past the bound
                        admitAfterHold(record, lease: lease, sending: &requests, outlet: outlet)
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
        /// Its partition is not this member's, or not under the lease it was fetched in (revoked or
        /// lost since, perhaps assigned back): dropped unread.
        case notOwned
        /// Admitted (or skipped) under its partition's lease.
        case admitted(PartitionLease, StateMachine.AdmitAction, running: Int)
        /// Input is held: the reader waits for the hold to end, then admits it under this lease.
        case held(PartitionLease)
    }

    /// Admits a record once the reader's wait is over (the hold ended, or shutdown began): its lease
    /// was taken when it was read, and `StateMachine.admit` checks it again.
    private func admitAfterHold(
        _ record: KafkaConsumerMessage, lease: PartitionLease, sending requests: inout [NotificationRequest],
        outlet: Outlet
    ) {
        let bytes = record.byteCount
        let (action, running) = state.withLock { state in
            (state.admit(record.topicPartition, offset: record.offset, lease: lease, bytes: bytes), state.running)
        }
        applyAdmission(
            record, bytes: bytes, lease: lease, action: action, running: running, sending: &requests,
            outlet: outlet)
    }

    /// After the lock, does what `StateMachine.admit` decided: starts the record, counts it as done
    /// already, or drops it (skipped).
    private func applyAdmission(
        _ record: KafkaConsumerMessage, bytes: Int, lease: PartitionLease, action: StateMachine.AdmitAction,
        running: Int,
        sending requests: inout [NotificationRequest], outlet: Outlet
    ) {
        if case .alreadyDone = action {
            // Its last owner published its result and recorded it as done: not pushed again.
            steps.step()
            observer.alreadyDone()
            commits.wantCommit()
            return
        }
        // Skipped: revoked meanwhile, or stopping. Uncommitted: its partition's owner reads it again.
        guard case .run(let holdBegan, let refusedKnownDone) = action else { return }
        if refusedKnownDone { reportKnownDoneRefused(record.topicPartition, at: record.offset) }
        steps.step()
        if holdBegan { observer.inputHeldChanged(true) }
        observer.inFlightChanged(running)
        start(record, bytes: bytes, lease: lease, sending: &requests, outlet: outlet)
    }

    private func sendAll(_ requests: inout [NotificationRequest]) {
        guard !requests.isEmpty else { return }
        sender.send(requests)
        requests.removeAll(keepingCapacity: true)
    }

    private func waitWhileHeld() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if state.withLock({ $0.readOrWait(continuation) }) { continuation.resume() }
        }
    }
}
