/// The records of a `KafkaConsumer`, in partition order, as they arrive. One reader at a time.
///
/// The sequence ends (`nil`) when the consumer is closed and throws a fatal `KafkaError` if librdkafka
/// raises one. A cancelled reader gets `nil`.
package struct KafkaConsumerMessages: AsyncSequence, Sendable {
    package typealias Element = KafkaConsumerMessage

    let core: KafkaConsumerCore
    let client: RDKafkaClient

    package func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(core: core, client: client)
    }

    package struct AsyncIterator: AsyncIteratorProtocol {
        let core: KafkaConsumerCore
        let client: RDKafkaClient

        /// The next record if one is already buffered, else `nil` at once (no wait, no error: the end of
        /// the sequence and a failure are `next()`'s to report). For readers that handle records in
        /// batches: take one with `next()`, then what else has arrived with this, and act on the lot.
        package mutating func nextIfBuffered() -> KafkaConsumerMessage? {
            guard
                case .message(let message, let pausesChanged, let wakePoller) = core.state.withLock({
                    $0.takeBuffered()
                })
            else { return nil }
            core.tookRecord(pausesChanged: pausesChanged, wakePoller: wakePoller, client: client)
            return message
        }

        package mutating func next() async throws -> KafkaConsumerMessage? {
            switch core.state.withLock({ $0.take() }) {
            case .message(let message, let pausesChanged, let wakePoller):
                core.tookRecord(pausesChanged: pausesChanged, wakePoller: wakePoller, client: client)
                return message
            case .finished(let error):
                if let error { throw error }
                return nil
            case .empty:
                break
            }
            let (core, client) = (self.core, self.client)
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    switch core.state.withLock({ $0.wait(continuation) }) {
                    case .message(let message, let pausesChanged, let wakePoller):
                        core.tookRecord(pausesChanged: pausesChanged, wakePoller: wakePoller, client: client)
                        continuation.resume(returning: message)
                    case .finished(let error):
                        if let error {
                            continuation.resume(throwing: error)
                        } else {
                            continuation.resume(returning: nil)
                        }
                    case .empty:
                        break  // stored; the poll thread resumes it
                    }
                }
            } onCancel: {
                core.state.withLock { $0.cancelWait() }?.resume(returning: nil)
            }
        }
    }
}
