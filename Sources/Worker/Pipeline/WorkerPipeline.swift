import APNs
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// The worker: consume → decode + validate → send → classify → retry → publish one result per
/// event (and a dead letter where the outcome table says so) → commit the done prefix.
///
/// At-least-once: an offset is committed only after the results of it and of everything before it
/// in its partition are acknowledged by Kafka. On SIGTERM (graceful shutdown) it stops reading,
/// lets in-flight events finish (bounded), commits, and leaves the group; a revocation does the same
/// for the partitions it takes away.
public final class WorkerPipeline: Service, Sendable {
    public let configuration: PipelineConfiguration
    private let consumerConfiguration: KafkaConsumerConfiguration
    private let producerConfiguration: KafkaProducerConfiguration
    private let processor: EventProcessor
    private let sender: any NotificationSending
    /// Every wait of an event (backoff, throttle, publish retry); cancelled once draining is over.
    private let scheduler: EventLoopDelayScheduler
    private let observer: any PipelineObserver
    private let logger: Logger
    let state: NIOLockedValueBox<PipelineStateMachine>
    private let stopping = NIOLockedValueBox(false)
    private let consumerBox = NIOLockedValueBox<KafkaConsumer?>(nil)
    private let failure = NIOLockedValueBox<(any Error)?>(nil)

    public init(
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
            observer: observer, logger: logger)
        self.state = NIOLockedValueBox(PipelineStateMachine(maxInFlight: configuration.maxInFlight))
    }

    /// Events consumed and not yet done.
    public var inFlight: Int { state.withLockedValue { $0.running } }

    public func run() async throws {
        let producer = try KafkaProducer(configuration: producerConfiguration, logger: logger)
        let publisher = ResultPublisher(producer: producer, scheduler: scheduler, observer: observer, logger: logger)
        let (commitRequests, commitQueue) = AsyncStream<CommitRequest>.makeStream()
        let rebalance = RebalanceBridge(pipeline: self, commits: commitQueue)
        let observer = self.observer
        let consumer = try KafkaConsumer(
            configuration: consumerConfiguration, rebalanceHandler: rebalance,
            statisticsHandler: { observer.lag($0) }, logger: logger)
        consumerBox.withLockedValue { $0 = consumer }
        try consumer.subscribe(topics: configuration.inputTopics)
        logger.info(
            "consuming \(configuration.inputTopics.joined(separator: ", ")) as group \(consumerConfiguration.groupID)")

        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.commitLoop(commitRequests, consumer: consumer) }
                group.addTask { await self.ticker(commitQueue) }
                await readLoop(consumer, publisher: publisher)
                // The sequence ended: the consumer was closed (shutdown) or failed. Let what runs finish;
                // what still waits for a retry after that is abandoned (uncommitted: read again).
                await waitForDrain(of: nil, timeout: configuration.shutdownTimeout)
                scheduler.cancelAll()
                commitQueue.finish()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.beginShutdown()
        }
        await consumer.close()  // no-op after a graceful shutdown; leaves the group after a failure
        // Requests still in flight (a drain that timed out) end here; their results are published
        // if the producer still takes them, or abandoned.
        await sender.shutdown()
        do {
            try await producer.flush(timeout: .seconds(10))
        } catch {
            logger.error("results not acknowledged at shutdown: \(error)")
        }
        await producer.close()
        if let error = failure.withLockedValue({ $0 }) {
            logger.critical("stopped after a failure: \(error)")
            throw error
        }
        logger.info("stopped")
    }

    /// Stops reading and leaves the group; the revocation inside `close()` drains and commits.
    public func beginShutdown() {
        guard
            !stopping.withLockedValue({
                let was = $0; $0 = true; return was
            })
        else { return }
        logger.info("shutting down: draining \(inFlight) in-flight events")
        if let consumer = consumerBox.withLockedValue({ $0 }) {
            Task { await consumer.close() }
        }
    }

    var isStopping: Bool { stopping.withLockedValue { $0 } }

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
    private func readLoop(_ consumer: KafkaConsumer, publisher: ResultPublisher) async {
        var records = consumer.messages.makeAsyncIterator()
        var requests: [NotificationRequest] = []
        requests.reserveCapacity(Self.readBatch)
        do {
            while var record = try await records.next() {
                var taken = 1
                while true {
                    if !isStopping {  // else revoked and uncommitted: read again by the next owner
                        observer.consumed(topic: record.topic)
                        if state.withLockedValue({ $0.paused }) {
                            // The batch's requests first: the events that free the bound may be among them.
                            sendAll(&requests)
                            await waitWhilePaused()
                        }
                        let running = state.withLockedValue { state in
                            if state.admit(record.topicPartition, offset: record.offset) {
                                consumer.pause(Array(consumer.assignment))
                                observer.pausedChanged(true)
                            }
                            return state.running
                        }
                        observer.inFlightChanged(running)
                        start(record, sending: &requests, publisher: publisher, consumer: consumer)
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
            failure.withLockedValue { $0 = error }
            beginShutdown()
        }
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
        _ record: KafkaConsumerMessage, sending requests: inout [NotificationRequest], publisher: ResultPublisher,
        consumer: KafkaConsumer
    ) {
        let started = ContinuousClock.now
        processor.process(record, sending: &requests) { result in
            guard let result else {
                self.finish(record.topicPartition, record.offset, consumer: consumer, completed: false)
                return
            }
            self.publish(result, of: record, started: started, publisher: publisher, consumer: consumer)
        }
    }

    /// The dead letter first (if any), then the result: a result event is out only once its dead
    /// letter is stored. The offset counts as done once both are acknowledged.
    ///
    /// The callbacks keep only what they need (partition, offset, outcome), not the record and the
    /// result: each capture copies every reference they hold.
    private func publish(
        _ result: EventResult, of record: KafkaConsumerMessage, started: ContinuousClock.Instant,
        publisher: ResultPublisher, consumer: KafkaConsumer
    ) {
        let completedAt = Date()
        let partition = record.topicPartition
        let offset = record.offset
        let outcome = result.outcome
        let deadLetterReason = result.deadLetter
        let message = ResultEvent.message(
            for: result, source: record, latency: ContinuousClock.now - started, completedAt: completedAt,
            topic: configuration.resultsTopic)
        let publishResult: @Sendable () -> Void = { [self] in
            publisher.publish(message) { published in
                self.finish(partition, offset, consumer: consumer, completed: published)
                guard published else { return }
                if let deadLetterReason { self.observer.deadLettered(deadLetterReason) }
                self.observer.completed(outcome, duration: ContinuousClock.now - started)
            }
        }
        guard let deadLetterReason else {
            publishResult()
            return
        }
        let deadLetter = DeadLetterRecord.message(
            for: record, result: result, reason: deadLetterReason, consumerGroup: consumerConfiguration.groupID,
            topic: configuration.deadLetterTopic, now: completedAt)
        publisher.publish(deadLetter) { published in
            if published {
                publishResult()
            } else {
                self.finish(partition, offset, consumer: consumer, completed: false)
            }
        }
    }

    /// The event is done (`completed`) or abandoned (cancelled: it stays uncommitted).
    private func finish(
        _ partition: KafkaTopicPartition, _ offset: Int64, consumer: KafkaConsumer, completed: Bool
    ) {
        let (action, running) = state.withLockedValue { state in
            let action = completed ? state.finish(partition, offset: offset) : state.abandon(partition, offset: offset)
            if action.resumeConsumer { consumer.resume(Array(consumer.assignment)) }
            return (action, state.running)
        }
        if action.resumeConsumer { observer.pausedChanged(false) }
        observer.inFlightChanged(running)
        action.resume?.resume()
        for waiter in action.drained { waiter.resume() }
    }

    // MARK: drains and commits

    /// Waits until no event of these partitions (of any, for `nil`) is in flight, or the timeout.
    func waitForDrain(of partitions: Set<KafkaTopicPartition>?, timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    if self.state.withLockedValue({ $0.waitForDrain(of: partitions, continuation) }) {
                        continuation.resume()
                    }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let waiters = self.state.withLockedValue { $0.cancelDrainWait { $0 == partitions } }
                if !waiters.isEmpty {
                    self.logger.warning(
                        "\(waiters.count) drain wait(s) timed out after \(timeout); events still in flight will be read again"
                    )
                }
                for waiter in waiters { waiter.resume() }
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func ticker(_ commits: AsyncStream<CommitRequest>.Continuation) async {
        while !Task.isCancelled {
            guard (try? await Task.sleep(for: configuration.commitInterval)) != nil else { return }
            commits.yield(.periodic)
            observer.heartbeat()
        }
    }

    /// The only place offsets are committed: requests are served one at a time, so a commit
    /// computed earlier can never land after (and undo) a later one.
    private func commitLoop(_ requests: AsyncStream<CommitRequest>, consumer: KafkaConsumer) async {
        for await request in requests {
            let selection: Set<KafkaTopicPartition>?
            switch request {
            case .periodic: selection = nil
            case .partitions(let partitions, _): selection = partitions
            }
            let offsets = state.withLockedValue { $0.tracker.commitCandidates(in: selection) }
            if !offsets.isEmpty {
                do {
                    try await consumer.commit(offsets)
                    state.withLockedValue { $0.markCommitted(offsets) }
                    observer.committed(ok: true)
                } catch {
                    observer.committed(ok: false)
                    logger.warning("commit failed: \(error)")
                }
            }
            if case .partitions(_, let done) = request { done() }
        }
    }

    fileprivate func revoked(
        _ partitions: [KafkaTopicPartition], lost: Bool, commits: AsyncStream<CommitRequest>.Continuation
    ) async {
        observer.partitionsRevoked(partitions)
        let selection = Set(partitions)
        await waitForDrain(
            of: selection, timeout: isStopping ? configuration.shutdownTimeout : configuration.revocationTimeout)
        if !lost {
            // Bounded: this runs while librdkafka's poll thread waits for it, and a commit can wait
            // for the very rebalance that waits for us (seen on the mock cluster: two members both
            // idle for minutes). Past the bound the partitions go uncommitted past their last
            // commit: their next owner reads those events again (duplicates, never losses).
            let bound = isStopping ? configuration.shutdownTimeout : configuration.revocationTimeout
            let committed = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let once = ResumeOnce(continuation)
                // Cancelled once the commit is done: no sleeping task outlives a quick revocation.
                let timer = Task {
                    guard (try? await Task.sleep(for: bound)) != nil else { return }
                    once.resume(false)
                }
                let done: @Sendable () -> Void = {
                    timer.cancel()
                    once.resume(true)
                }
                if case .terminated = commits.yield(.partitions(selection, done)) { done() }
            }
            if !committed {
                logger.warning(
                    "revocation: the commit did not finish within \(bound); letting the partitions go uncommitted")
            }
        }
        state.withLockedValue { $0.forget(partitions) }
    }

    fileprivate func assigned(_ partitions: [KafkaTopicPartition]) {
        observer.consumerJoined()
        // Paused for backpressure: new partitions wait too.
        state.withLockedValue { state in
            if state.paused, let consumer = consumerBox.withLockedValue({ $0 }) { consumer.pause(partitions) }
        }
    }
}

enum CommitRequest: Sendable {
    case periodic
    /// Commit these partitions now and say when done (a revocation).
    case partitions(Set<KafkaTopicPartition>, @Sendable () -> Void)
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
    let commits: AsyncStream<CommitRequest>.Continuation

    func partitionsAssigned(_ partitions: [KafkaTopicPartition]) async {
        pipeline.assigned(partitions)
    }

    func partitionsRevoked(_ partitions: [KafkaTopicPartition], lost: Bool) async {
        await pipeline.revoked(partitions, lost: lost, commits: commits)
    }
}
