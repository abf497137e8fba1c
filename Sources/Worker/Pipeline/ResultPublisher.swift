import Threading
import APNs
import Foundation
import Kafka
import Logging
import Synchronization

/// Publishes a record until Kafka acknowledges it, and decides what a failure means for it:
///
/// - transient (a broker away, a time-out): librdkafka retries within its delivery timeout, and
///   past that this retries too, with backoff, so a result is never dropped;
/// - this record can never be stored as it is (too large for `message.max.bytes` or the broker's
///   limit, refused by the topic's rules): its degraded form is published instead (the pipeline
///   says what that is: a dead letter without its value, a result without its metadata), so the
///   event still ends and its partition's commit moves on;
/// - the topic refuses every record (unknown, not authorized), or the degraded form is refused
///   too: the topic is reported blocked (the pipeline stops taking input) and the record retried
///   with backoff until the topic takes records again;
/// - the producer is fenced or lost its guarantees (fatal): reported, and the record abandoned
///   (uncommitted); the pipeline stops, and a restarted worker reads it again.
///
/// It gives up only then, or when the scheduler is cancelled (shutdown): the event stays uncommitted.
///
/// A class: every record's delivery callback captures it, and a struct's references were each
/// retained and released per record.
final class ResultPublisher: Sendable {
    /// What the pipeline hears about its output topics.
    enum Report: Sendable {
        /// Every record to this topic is refused; input should stop.
        case blocked(topic: String, KafkaError)
        /// A record was stored in a topic reported blocked.
        case unblocked(topic: String)
        /// The producer is unusable; the worker should stop (non-zero) and be restarted.
        case fatal(KafkaError)
    }

    let producer: KafkaProducer
    let scheduler: any DelayScheduling
    let observer: any PipelineObserver
    let logger: Logger
    let report: @Sendable (Report) -> Void
    /// Counts each publish attempt's end, for liveness.
    let steps: StepCounter
    /// How many topics are reported blocked: while none is, a stored record reports nothing (one
    /// atomic read per record, no lock).
    private let blockedTopics = BlockedTopicCount()
    /// Records Kafka has stored: the pipeline's ticker tells from it whether Kafka takes results.
    private let acknowledgedCount = Atomic<UInt64>(0)

    var acknowledged: UInt64 { acknowledgedCount.load(ordering: .relaxed) }

    /// 100 ms doubling to 30 s, without jitter: one record's tries, which need no spreading.
    static let backoff = Backoff(first: .milliseconds(100), maximum: .seconds(30), jitter: .none)
    /// A full local queue is not a failure: it drains as Kafka acknowledges.
    static let queueFullWait: Duration = .milliseconds(10)

    init(
        producer: KafkaProducer, scheduler: any DelayScheduling, observer: any PipelineObserver, logger: Logger,
        steps: StepCounter = StepCounter(), report: @escaping @Sendable (Report) -> Void = { _ in }
    ) {
        self.producer = producer
        self.scheduler = scheduler
        self.observer = observer
        self.logger = logger
        self.report = report
        self.steps = steps
    }

    /// How to make a record's smaller form, for a record Kafka can never store as it is (the error
    /// says why). A value rather than a closure: it rides in the attempt, so a publish allocates
    /// nothing for a form that is almost never needed.
    enum Degradation: Sendable {
        /// A result event without its metadata (`ResultRecord.degraded`).
        case result(
            EventResult, source: KafkaConsumerMessage, latency: Duration, completedAt: Date, topic: String,
            trace: [KafkaHeader])
        /// A dead letter without the event's value (`DeadLetterRecord.degraded`).
        case deadLetter(KafkaProducerMessage, source: KafkaConsumerMessage)

        /// The degraded form of a result, keeping only what that form is made of: the result
        /// without its metadata (the form leaves it out), and the source record's topic, partition
        /// and offset without its key, value and headers, and the trace context the full result
        /// carries (`trace`). What rides in the attempt lives until
        /// Kafka acknowledges the record, and is then freed on the thread that published it: the
        /// decoded metadata and the record's bytes, made on the reading and consumer threads, go
        /// back with the event instead (HomeRelease) and are freed there.
        static func resultForm(
            of result: EventResult, source: KafkaConsumerMessage, latency: Duration, completedAt: Date, topic: String,
            trace: [KafkaHeader]
        ) -> Degradation {
            var kept = result
            kept.metadata = nil
            let position = KafkaConsumerMessage(
                topic: source.topic, partition: source.partition, offset: source.offset, key: nil, value: nil)
            return .result(
                kept, source: position, latency: latency, completedAt: completedAt, topic: topic, trace: trace)
        }

        func message(for error: KafkaError) -> KafkaProducerMessage? {
            switch self {
            case .result(let result, let source, let latency, let completedAt, let topic, let trace):
                ResultRecord.degraded(
                    for: result, source: source, latency: latency, completedAt: completedAt, topic: topic,
                    trace: trace, error: error)
            case .deadLetter(let deadLetter, let source):
                DeadLetterRecord.degraded(deadLetter, source: source, error: error)
            }
        }
    }

    /// How a publication ended, as an event's run takes it.
    typealias Publication = EventRun.StateMachine.Publication

    /// `done(.stored)` once Kafka stored the record (`.storedDegraded`: its degraded form), on the
    /// producer's poll thread; `done(.abandoned)` if given up. Called exactly once.
    func publish(
        _ message: KafkaProducerMessage, degraded: Degradation? = nil,
        _ done: @escaping @Sendable (Publication) -> Void
    ) {
        publish(Attempt(message: message, degrade: degraded), done)
    }

    /// One record between its tries.
    private struct Attempt: Sendable {
        var message: KafkaProducerMessage
        var degrade: Degradation?
        /// Tries that failed so far.
        var failures = 0
        var failing = false
        /// Its degraded form is the one being published.
        var degraded = false
    }

    private func publish(_ attempt: Attempt, _ done: @escaping @Sendable (Publication) -> Void) {
        do {
            try producer.trySend(attempt.message) { [self] delivery in
                steps.step()
                switch delivery {
                case .success:
                    acknowledgedCount.add(1, ordering: .relaxed)
                    stored(attempt)
                    done(attempt.degraded ? .storedDegraded : .stored)
                case .failure(let error):
                    failed(attempt, error, done)
                }
            }
        } catch  where error.code == .queueFull {
            scheduler.after(Self.queueFullWait) { [self] cancelled in
                if cancelled { done(.abandoned) } else { publish(attempt, done) }
            }
        } catch {
            failed(attempt, error, done)
        }
    }

    /// Whether `topic` refuses every record now, as far as this publisher has seen.
    func isBlocked(_ topic: String) -> Bool { blockedTopics.contains(topic) }

    private func stored(_ attempt: Attempt) {
        if attempt.failing { observer.producerRecovered() }
        if blockedTopics.any, blockedTopics.remove(attempt.message.topic) {
            report(.unblocked(topic: attempt.message.topic))
        }
    }

    private func failed(
        _ attempt: Attempt, _ error: KafkaError, _ done: @escaping @Sendable (Publication) -> Void
    ) {
        var attempt = attempt
        let topic = attempt.message.topic
        var blocksTopic = false
        switch error.produceFailureScope {
        case .fatal:
            logger.critical("publishing to \(topic) failed for good, the producer is unusable: \(error)")
            observer.producerFailing(error)
            report(.fatal(error))
            done(.abandoned)
            return
        case .record:
            if let degrade = attempt.degrade, let smaller = degrade.message(for: error) {
                logger.warning(
                    "a record for \(topic) cannot be stored as it is (\(error.code.name)); publishing its degraded form"
                )
                observer.publishedDegraded(topic: topic, reason: error.code.name)
                attempt.message = smaller
                attempt.degrade = nil
                attempt.degraded = true
                publish(attempt, done)
                return
            }
            // Not even the smallest form is stored: as good as a topic that refuses everything.
            blocksTopic = true
        case .topic:
            blocksTopic = true
        case .transient:
            break
        }
        if blocksTopic, blockedTopics.insert(topic) { report(.blocked(topic: topic, error)) }
        observer.producerFailing(error)
        attempt.failures += 1
        let wait = Self.backoff.wait(afterFailures: attempt.failures)
        logger.error("publishing to \(topic) failed: \(error); retrying in \(wait)")
        attempt.failing = true
        let next = attempt
        scheduler.after(wait) { [self] cancelled in
            if cancelled { done(.abandoned) } else { publish(next, done) }
        }
    }
}

/// The topics reported blocked, with a lock-free "none" for the path every record takes.
private final class BlockedTopicCount: Sendable {
    private let count = Atomic<Int>(0)
    private let topics = Locked<Set<String>>([])

    var any: Bool { count.load(ordering: .acquiring) > 0 }

    func contains(_ topic: String) -> Bool { topics.withLock { $0.contains(topic) } }

    /// Returns true if the topic was not blocked yet.
    func insert(_ topic: String) -> Bool {
        guard topics.withLock({ $0.insert(topic).inserted }) else { return false }
        count.add(1, ordering: .releasing)
        return true
    }

    /// Returns true if the topic was blocked.
    func remove(_ topic: String) -> Bool {
        guard topics.withLock({ $0.remove(topic) != nil }) else { return false }
        count.subtract(1, ordering: .releasing)
        return true
    }
}
