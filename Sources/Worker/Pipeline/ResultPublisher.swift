import Kafka
import Logging

/// Publishes a record until Kafka acknowledges it: librdkafka retries within its delivery timeout,
/// and past that this retries too, with backoff, so a result is never dropped. It gives up only
/// when the scheduler is cancelled (a forced shutdown): then the event stays uncommitted.
struct ResultPublisher: Sendable {
    let producer: KafkaProducer
    let scheduler: any DelayScheduling
    let observer: any PipelineObserver
    let logger: Logger

    static let firstBackoff: Duration = .milliseconds(100)
    static let maxBackoff: Duration = .seconds(30)
    /// A full local queue is not a failure: it drains as Kafka acknowledges.
    static let queueFullWait: Duration = .milliseconds(10)

    /// `done(true)` once Kafka stored the record (on the producer's poll thread), `done(false)` if
    /// abandoned. Called exactly once.
    func publish(_ message: KafkaProducerMessage, _ done: @escaping @Sendable (Bool) -> Void) {
        publish(message, backoff: Self.firstBackoff, failing: false, done)
    }

    private func publish(
        _ message: KafkaProducerMessage, backoff: Duration, failing: Bool, _ done: @escaping @Sendable (Bool) -> Void
    ) {
        do {
            try producer.trySend(message) { report in
                switch report {
                case .success:
                    if failing { observer.producerRecovered() }
                    done(true)
                case .failure(let error):
                    retry(message, after: error, backoff: backoff, done)
                }
            }
        } catch  where error.code == .queueFull {
            scheduler.after(Self.queueFullWait) { cancelled in
                if cancelled { done(false) } else { publish(message, backoff: backoff, failing: failing, done) }
            }
        } catch {
            retry(message, after: error, backoff: backoff, done)
        }
    }

    private func retry(
        _ message: KafkaProducerMessage, after error: KafkaError, backoff: Duration,
        _ done: @escaping @Sendable (Bool) -> Void
    ) {
        observer.producerFailing(error)
        logger.error("publishing to \(message.topic) failed: \(error); retrying in \(backoff)")
        scheduler.after(backoff) { cancelled in
            if cancelled {
                done(false)
            } else {
                publish(message, backoff: min(backoff * 2, Self.maxBackoff), failing: true, done)
            }
        }
    }
}
