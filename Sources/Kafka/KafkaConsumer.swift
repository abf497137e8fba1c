import Dispatch
import Foundation
import Logging
import Synchronization

/// A consumer-group member over librdkafka.
///
/// Records arrive through `messages`, an `AsyncSequence` with one reader, fed by a poll loop on a
/// thread of its own (librdkafka's poll blocks, so it never runs on the cooperative pool). Offsets
/// are committed only by `commit(_:)`: nothing is committed behind the caller's back.
///
/// Flow control: at most `bufferCapacity` records wait for the reader; at that mark the consumer
/// pauses its partitions and resumes them at half, while the poll loop keeps serving rebalances and
/// heartbeats. Memory stays flat whatever the backlog.
///
/// Call `close()` before dropping the consumer: it leaves the group cleanly (running the rebalance
/// handler's revocation) and stops the poll thread, which otherwise keeps the consumer alive.
package final class KafkaConsumer: Sendable {
    private let client: RDKafkaClient
    private let core: KafkaConsumerCore
    /// Blocking librdkafka calls made for async callers (commits, committed-offset queries) run here,
    /// in order: a later commit can never land before an earlier one.
    private let blockingQueue: DispatchQueue
    /// For reads that must not wait behind a commit (which can wait for a rebalance): the committed
    /// offsets a rebalance handler reads while the rebalance waits for it.
    private let readingQueue: DispatchQueue
    package let messages: KafkaConsumerMessages

    /// - Parameter errorHandler: called (on the poll thread) with each error librdkafka reports and
    ///   retries itself: a broker it cannot reach, a TLS handshake or a SASL authentication that
    ///   failed. They are logged either way; a fatal error ends `messages` instead.
    package convenience init(
        configuration: KafkaConsumerConfiguration,
        rebalanceHandler: (any KafkaRebalanceHandler)? = nil,
        statisticsHandler: (@Sendable (KafkaConsumerStatistics) -> Void)? = nil,
        stallHandler: (@Sendable (KafkaPartitionStall) -> Void)? = nil,
        errorHandler: (@Sendable (KafkaError) -> Void)? = nil,
        logger: Logger = Logger(label: "kafka.consumer")
    ) throws(KafkaError) {
        try self.init(
            configuration: configuration, rebalanceHandler: rebalanceHandler, statisticsHandler: statisticsHandler,
            stallHandler: stallHandler, errorHandler: errorHandler, partitionEnd: nil, logger: logger)
    }

    /// - Parameter partitionEnd: the broker's end of a partition for the stall watch, where a test
    ///   answers for the broker; `nil` asks the broker.
    init(
        configuration: KafkaConsumerConfiguration, rebalanceHandler: (any KafkaRebalanceHandler)?,
        statisticsHandler: (@Sendable (KafkaConsumerStatistics) -> Void)?,
        stallHandler: (@Sendable (KafkaPartitionStall) -> Void)?, errorHandler: (@Sendable (KafkaError) -> Void)?,
        partitionEnd: (@Sendable (KafkaTopicPartition) -> Int64?)?, logger: Logger
    ) throws(KafkaError) {
        var tagged = logger
        tagged[metadataKey: "kafka-client"] = "consumer"  // the producer's lines look the same
        let logger = tagged
        // Under the next-generation protocol, a broker that does not speak it gives no error: watched.
        let heartbeatWatch = configuration.groupProtocol == .consumer ? HeartbeatWatch(bound: .seconds(10)) : nil
        let core = KafkaConsumerCore(
            capacity: configuration.bufferCapacity, byteCapacity: configuration.bufferByteCapacity,
            handler: rebalanceHandler,
            handlerTimeout: configuration.effective.maxPollInterval, stallBound: configuration.stallBound,
            stallHandler: stallHandler, partitionEnd: partitionEnd, heartbeatWatch: heartbeatWatch,
            errorHandler: errorHandler, logger: logger)
        let config = try RDKafkaConfig(properties: configuration.librdkafkaProperties)
        var onStatistics: (@Sendable (String) -> Void)?
        if let statisticsHandler {
            onStatistics = { json in
                if let statistics = KafkaConsumerStatistics(json: json) { statisticsHandler(statistics) }
            }
        }
        let onError: @Sendable (KafkaError) -> Void = { error in
            core.clientError(error)
            if !error.isFatal { errorHandler?(error) }
        }
        var onResponse: (@Sendable (Int16, KafkaError.Code) -> Void)?
        if let heartbeatWatch {
            onResponse = { apiKey, code in heartbeatWatch.response(apiKey: apiKey, error: code) }
        }
        let callbacks = RDKafkaCallbacks(
            logger: logger,
            rebalance: { rebalance in core.rebalance(rebalance) },
            statistics: onStatistics,
            error: onError,
            responses: onResponse)
        self.client = try RDKafkaClient(.consumer, config: config, callbacks: callbacks)
        // The main queue (errors, statistics, logs) to the consumer queue that the poll loop serves.
        client.consumer.routeMainQueueToConsumerQueue()
        self.core = core
        self.blockingQueue = DispatchQueue(label: "kafka.consumer.blocking")
        self.readingQueue = DispatchQueue(label: "kafka.consumer.reading", attributes: .concurrent)
        self.messages = KafkaConsumerMessages(core: core, client: client)
        core.startPolling(client)
    }

    /// Joins the group for these topics (replacing any earlier subscription).
    package func subscribe(topics: [String]) throws(KafkaError) {
        try client.consumer.subscribe(topics)
    }

    /// Reads these partitions from these offsets without joining a group (no rebalances; the group ID
    /// is only used if the caller commits). Use `KafkaOffset.beginning`/`.end` for the ends.
    /// Replaces any earlier manual assignment.
    package func assign(_ start: [KafkaTopicPartitionOffset]) throws(KafkaError) {
        let partitions = start.map(\.topicPartition)
        // With the tenure changed under the same lock: a stall answer about the assignment this
        // replaces is then known to be about another one.
        let assigned = core.assignmentChange.withLock { _ -> Result<Void, KafkaError> in
            do throws(KafkaError) {
                try client.consumer.assign(start)
            } catch {
                return .failure(error)
            }
            core.state.withLock { state in
                _ = state.revoke(Array(state.assigned))
                state.assign(partitions)
            }
            return .success(())
        }
        try assigned.get()
        core.applyPauses(client.consumer)
    }

    /// The partition IDs of a topic, from the cluster's metadata.
    package func partitions(of topic: String, timeout: Duration = .seconds(10)) async throws -> [Int32] {
        let client = self.client
        return try await onBlockingQueue { () throws(KafkaError) in try client.partitionIDs(of: topic, timeout: timeout)
        }
    }

    /// Every topic the cluster has. Unlike `partitions(of:)`, asking never creates a topic on a
    /// broker that creates topics on first use.
    package func topicNames(timeout: Duration = .seconds(10)) async throws -> Set<String> {
        let client = self.client
        return try await onBlockingQueue { () throws(KafkaError) in try client.topicNames(timeout: timeout) }
    }

    /// The first offset still stored in a partition and one past its last (its end). Safe inside a
    /// rebalance handler: it does not queue behind a commit.
    package func watermarks(
        of partition: KafkaTopicPartition, timeout: Duration = .seconds(10)
    ) async throws -> (low: Int64, high: Int64) {
        let client = self.client
        return try await onBlockingQueue(readingQueue) { () throws(KafkaError) in
            try client.watermarks(of: partition, timeout: timeout)
        }
    }

    /// Each partition's end (ListOffsets: one past its last record, or the last stable offset under
    /// `read_committed`, as `watermarks(of:)` has it), asked for all of them at once: each answer is
    /// yielded as it arrives, so a slow leader delays only its own partitions, and the sequence ends
    /// once every partition has answered or `timeout` has passed. Safe inside a rebalance handler: it
    /// does not queue behind a commit.
    package func ends(of partitions: [KafkaTopicPartition], timeout: Duration) -> AsyncStream<KafkaPartitionEnd> {
        let (answers, continuation) = AsyncStream.makeStream(of: KafkaPartitionEnd.self)
        let client = self.client
        readingQueue.async {
            client.ends(of: partitions, timeout: timeout) { partition, end in
                continuation.yield(KafkaPartitionEnd(partition: partition, end: end))
            }
            continuation.finish()
        }
        return answers
    }

    /// A partition's end as the last fetch response for it reported, without asking the broker; nil
    /// until this consumer has fetched from it. Unlike `watermarks(of:)` (a ListOffsets request), it
    /// is right on brokers whose ListOffsets answer lags (Tansu 0.6 reports the start of the last
    /// record batch there).
    package func fetchedHighWatermark(of partition: KafkaTopicPartition) -> Int64? {
        client.fetchedHighWatermark(of: partition)
    }

    /// The partitions currently assigned to this member.
    package var assignment: Set<KafkaTopicPartition> {
        core.state.withLock { $0.assigned }
    }

    /// The assigned partitions librdkafka has been told to pause (by `pause(_:)`, or because the
    /// hand-over buffer stayed full): it fetches nothing for them until they are resumed.
    package var pausedPartitions: Set<KafkaTopicPartition> { core.pausedPartitions }

    /// How long ago the poll thread last went round its loop: it serves rebalances and heartbeats,
    /// so a value far above 100 ms (its poll time-out) means it is stuck.
    package var sincePolled: Duration { core.sincePolled }

    /// Records handed over by librdkafka and waiting for the reader (at most about `bufferCapacity`).
    package var bufferedCount: Int {
        core.state.withLock { $0.bufferedCount }
    }

    /// Stops fetching from these partitions until `resume(_:)`. Records already handed over to the
    /// buffer may still arrive.
    package func pause(_ partitions: [KafkaTopicPartition]) {
        core.state.withLock { $0.pause(partitions) }
        core.applyPauses(client.consumer)
    }

    /// Fetches again from partitions paused with `pause(_:)`.
    package func resume(_ partitions: [KafkaTopicPartition]) {
        core.state.withLock { $0.resume(partitions) }
        core.applyPauses(client.consumer)
    }

    /// Commits these offsets (each the *next* offset to read) and returns once the group coordinator
    /// has stored them. Safe inside a rebalance handler.
    package func commit(_ offsets: [KafkaTopicPartitionOffset]) async throws {
        guard !offsets.isEmpty else { return }
        let client = self.client
        try await onBlockingQueue { () throws(KafkaError) in
            try client.consumer.commit(offsets)
        }
    }

    /// The group's committed offsets for these partitions (`nil` where none is stored).
    package func committedOffsets(
        for partitions: [KafkaTopicPartition], timeout: Duration = .seconds(10)
    ) async throws -> [KafkaTopicPartition: Int64?] {
        let client = self.client
        return try await onBlockingQueue { () throws(KafkaError) in
            var result: [KafkaTopicPartition: Int64?] = [:]
            for offset in try client.consumer.committed(partitions, timeout: timeout) {
                result[offset.topicPartition] = offset.offset >= 0 ? offset.offset : nil
            }
            return result
        }
    }

    /// The group's committed offsets for these partitions with their commit metadata; a partition
    /// with nothing committed has no entry.
    /// Safe inside a rebalance handler: it does not queue behind a commit.
    package func committed(
        _ partitions: [KafkaTopicPartition], timeout: Duration = .seconds(10)
    ) async throws -> [KafkaTopicPartition: KafkaTopicPartitionOffset] {
        let client = self.client
        return try await onBlockingQueue(readingQueue) { () throws(KafkaError) in
            var result: [KafkaTopicPartition: KafkaTopicPartitionOffset] = [:]
            for offset in try client.consumer.committed(partitions, timeout: timeout) where offset.offset >= 0 {
                result[offset.topicPartition] = offset
            }
            return result
        }
    }

    /// Leaves the group: the rebalance handler sees its partitions revoked (and commits), the message
    /// sequence ends, the poll thread stops. Idempotent.
    package func close() async {
        await core.close()
    }

    private func onBlockingQueue<T: Sendable>(
        _ queue: DispatchQueue? = nil, _ body: @escaping @Sendable () throws(KafkaError) -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            (queue ?? blockingQueue).async {
                do throws(KafkaError) {
                    continuation.resume(returning: try body())
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}

/// One partition's answer to `KafkaConsumer.ends(of:timeout:)`.
package struct KafkaPartitionEnd: Sendable {
    package var partition: KafkaTopicPartition
    package var end: Result<Int64, KafkaError>
}
