import Dispatch
import Foundation
import Logging
import Synchronization
import Threading

/// A producer over librdkafka, idempotent by default (`enable.idempotence`, `acks=all`).
///
/// Every send ends in exactly one delivery result: the partition and offset Kafka stored the record
/// at, or the error that made librdkafka give up (after its own retries, within `deliveryTimeout`).
/// Delivery results are served by a poll loop on a thread of its own.
package final class KafkaProducer: Sendable {
    private let client: RDKafkaClient
    private let poller: ProducerPoller
    private let blockingQueue = DispatchQueue(label: "kafka.producer.blocking")
    private let deliveryTimeout: Duration
    private let closed = Atomic<Bool>(false)

    /// - Parameter onFatalError: called (on librdkafka's thread) when the producer raises a fatal
    ///   error: an idempotent producer that lost its guarantees, or a fenced one. Every later send
    ///   fails with it; only a new producer recovers.
    /// - Parameter releaseSweep: how often the poll thread frees the delivery contexts of records
    ///   whose sending thread has not sent since they were acknowledged (`HomeRelease`); tests
    ///   change it.
    package init(
        configuration: KafkaProducerConfiguration, logger: Logger = Logger(label: "kafka.producer"),
        onFatalError: (@Sendable (KafkaError) -> Void)? = nil, releaseSweep: Duration = HomeRelease.sweepInterval
    ) throws(KafkaError) {
        var tagged = logger
        tagged[metadataKey: "kafka-client"] = "producer"  // the consumer's lines look the same
        let logger = tagged
        let config = try RDKafkaConfig(properties: configuration.librdkafkaProperties)
        let callbacks = RDKafkaCallbacks(
            logger: logger,
            error: { error in
                logger.log(level: error.isFatal ? .error : .warning, "\(error)")
                if error.isFatal { onFatalError?(error) }
            },
            deliveryReports: true)
        self.client = try RDKafkaClient(.producer, config: config, callbacks: callbacks)
        self.deliveryTimeout = configuration.effectiveDeliveryTimeout
        self.poller = ProducerPoller(client: client, releaseSweep: releaseSweep)
    }

    deinit {
        poller.stop()
    }

    /// Enqueues a record; `onDelivery` runs once, on the producer's poll thread, when Kafka has stored
    /// it or librdkafka gave up. Keep it short. What it captured is released afterwards by the thread
    /// that sent the record, the next time it sends (or within about two seconds, and at the latest
    /// by `close`: `HomeRelease`). Waits (without blocking a thread) while the local queue is full.
    /// Throws only when the record cannot be enqueued at all (unknown partition, record too large,
    /// producer closed or fenced); then `onDelivery` is never called.
    package func send(
        _ message: KafkaProducerMessage,
        onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void
    ) async throws(KafkaError) {
        var deadline: ContinuousClock.Instant?  // read the clock only once the queue is full
        while true {
            do throws(KafkaError) {
                try enqueue(message, onDelivery)
                return
            } catch  where error.code == .queueFull {
                let limit = deadline ?? ContinuousClock.now + deliveryTimeout
                deadline = limit
                guard ContinuousClock.now < limit else { throw error }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    /// Enqueues a record without waiting: as `send(_:onDelivery:)`, except that a full local queue
    /// throws `queueFull` at once (the caller decides when to try again). For callers that keep
    /// thousands of records in flight and cannot afford a task each.
    package func trySend(
        _ message: KafkaProducerMessage,
        onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void
    ) throws(KafkaError) {
        try enqueue(message, onDelivery)
    }

    /// Sends a record and returns once Kafka has stored it.
    package func send(_ message: KafkaProducerMessage) async throws -> KafkaDeliveryReport {
        var deadline: ContinuousClock.Instant?  // read the clock only once the queue is full
        while true {
            let report: KafkaDeliveryReport? = try await withCheckedThrowingContinuation { continuation in
                do throws(KafkaError) {
                    try enqueue(message) { continuation.resume(with: $0.map(Optional.some)) }
                } catch  where error.code == .queueFull {
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            if let report { return report }
            let limit = deadline ?? ContinuousClock.now + deliveryTimeout
            deadline = limit
            guard ContinuousClock.now < limit else { throw KafkaError(code: .queueFull, message: "local queue full") }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Learns these topics' partitions and leaders now, and keeps them current, so that the first
    /// records sent to them do not wait for it. librdkafka otherwise asks only when a topic's first
    /// record arrives, and that record waited 400 to 500 ms for the answer in the worker's benchmark.
    /// Returns at once; a topic that does not exist shows only when a record for it is sent.
    package func prepare(topics: [String]) {
        client.holdTopics(topics)
    }

    /// Waits until every enqueued record has its delivery result, or throws `timedOut`.
    package func flush(timeout: Duration) async throws {
        let handle = client
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            blockingQueue.async {
                if let error = handle.flush(timeout: timeout) {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume()
                }
            }
        }
    }

    /// Flushes (bounded by `timeout`), then fails whatever is left with `purged` and stops. Later sends throw.
    package func close(timeout: Duration = .seconds(30)) async {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        do {
            try await flush(timeout: timeout)
        } catch {
            client.logger.error("producer close: \(error)")
        }
        await poller.stopAndWait()
    }

    /// Raises a fatal error as librdkafka would on a broker's answer that breaks its guarantees
    /// (librdkafka's test hook), for tests of what a caller does then.
    package func raiseFatalErrorForTesting(_ reason: String) {
        client.raiseFatalErrorForTesting(reason)
    }

    /// Records enqueued and not yet acknowledged or failed.
    package var pendingCount: Int {
        client.outQueueLength
    }

    /// Since the poll thread last went round (it does every 100 ms): records waiting in a producer
    /// whose thread goes round are waiting for Kafka, not for a stuck process.
    package var sincePolled: Duration { poller.sincePolled }

    private func enqueue(
        _ message: KafkaProducerMessage,
        _ onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void
    ) throws(KafkaError) {
        guard !closed.load(ordering: .acquiring) else {
            throw KafkaError(code: .destroyed, message: "producer is closed")
        }
        // Contexts of this thread's acknowledged records: freed here, where they were allocated.
        HomeRelease.releaseHere()
        // Retained here; released out of this thread's bin once acknowledged, or below if librdkafka
        // refuses it.
        let context = Unmanaged.passRetained(DeliveryContext(topic: message.topic, home: HomeRelease.here, onDelivery))
            .toOpaque()
        if let error = RDKafkaProduce.produce(client.handle, message, opaque: context) {
            Unmanaged<DeliveryContext>.fromOpaque(context).release()
            throw error
        }
    }
}

/// The producer's poll thread: serves delivery reports until stopped, then fails what is left
/// (purge) and serves those reports too, so no delivery context is ever leaked. Every `releaseSweep`
/// it frees the acknowledged contexts that their sending threads have left that long
/// (`HomeRelease.sweep`), and when it stops, every context its reports put in a bin
/// (`HomeRelease.Homes`).
private final class ProducerPoller: Sendable {
    private let stopRequested = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private static let clock = ContinuousClock()
    private static let epoch = clock.now
    /// When the thread last went round, in nanoseconds since `epoch`.
    private let lastPoll = Atomic<Int64>(0)

    var sincePolled: Duration {
        Self.clock.now - Self.epoch - .nanoseconds(lastPoll.load(ordering: .relaxed))
    }

    init(client: RDKafkaClient, releaseSweep: Duration) {
        let thread = Thread { [self] in
            nameCurrentThread(Self.threadName)
            let clock = ContinuousClock()
            var lastSweep = clock.now
            while !stopRequested.load(ordering: .acquiring) {
                client.poll(milliseconds: 100)
                // Contexts whose sending thread has not sent since they were acknowledged.
                let now = clock.now
                let (seconds, attoseconds) = (now - Self.epoch).components
                lastPoll.store(seconds * 1_000_000_000 + attoseconds / 1_000_000_000, ordering: .relaxed)
                if now - lastSweep >= releaseSweep {
                    HomeRelease.sweep(olderThan: releaseSweep)
                    lastSweep = now
                }
            }
            client.purgeAll()
            let deadline = clock.now + .seconds(10)
            while client.outQueueLength > 0 && clock.now < deadline {
                client.poll(milliseconds: 50)
            }
            client.callbacks.homes.empty()
            finished.signal()
        }
        thread.start()
    }

    /// The poll thread's name as `top -H`, `ps -L` and `perf` show it (set by the thread itself, at
    /// most 15 bytes: see `KafkaConsumerCore.pollThreadName`).
    static let threadName = "kafka-producer"

    func stop() {
        stopRequested.store(true, ordering: .releasing)
    }

    func stopAndWait() async {
        stop()
        let finished = self.finished
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                finished.wait()
                continuation.resume()
            }
        }
    }
}
