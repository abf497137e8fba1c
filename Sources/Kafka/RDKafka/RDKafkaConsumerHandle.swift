internal import CRdKafka

/// The consumer calls on a handle, through a view that does not own it: the rebalance callback
/// gets the handle before the `RDKafkaClient` that owns it exists, and the consumer's core, which
/// the callbacks reach, calls through this.
///
/// `@unchecked Sendable`: librdkafka's handle is thread-safe for these calls; the pointer never changes.
struct RDKafkaConsumerHandle: @unchecked Sendable {
    let pointer: OpaquePointer

    /// What one poll of the consumer queue gave.
    enum Polled {
        case record(KafkaConsumerMessage)
        /// The end of a partition was reached (only with `enable.partition.eof`).
        case partitionEnd
        /// An error event librdkafka goes on from.
        case error(KafkaError)
        /// The consumer is unusable.
        case fatal(KafkaError)
    }

    /// The next record or event, waiting up to `timeoutMilliseconds`; `nil` when none came.
    func poll(timeoutMilliseconds: Int32, topicNames: inout TopicNames) -> Polled? {
        guard let message = rd_kafka_consumer_poll(pointer, timeoutMilliseconds) else { return nil }
        defer { rd_kafka_message_destroy(message) }
        let err = message.pointee.err
        switch err {
        case RD_KAFKA_RESP_ERR_NO_ERROR:
            return .record(KafkaConsumerMessage(copying: message, topicNames: &topicNames))
        case RD_KAFKA_RESP_ERR__PARTITION_EOF:
            return .partitionEnd
        case RD_KAFKA_RESP_ERR__FATAL:
            return .fatal(RDKafkaClient.fatalError(of: pointer) ?? KafkaError(err))
        default:
            return .error(KafkaError(err, String(cString: rd_kafka_message_errstr(message))))
        }
    }

    /// Leaves the group (revoking the assignment through the rebalance callback, inside this call).
    func close() -> KafkaError? {
        let err = rd_kafka_consumer_close(pointer)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(err)
    }

    /// Errors, statistics and logs go to the consumer queue that `poll` serves.
    func routeMainQueueToConsumerQueue() {
        rd_kafka_poll_set_consumer(pointer)
    }

    func subscribe(_ topics: [String]) throws(KafkaError) {
        let err = RDKafkaTopicPartitionList(topics: topics).withPointer { rd_kafka_subscribe(pointer, $0) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }

    /// A manual assignment from these offsets (replacing any earlier one).
    func assign(_ start: [KafkaTopicPartitionOffset]) throws(KafkaError) {
        let err = RDKafkaTopicPartitionList(start).withPointer { rd_kafka_assign(pointer, $0) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }

    func pause(_ partitions: some Collection<KafkaTopicPartition>) {
        _ = RDKafkaTopicPartitionList(partitions).withPointer { rd_kafka_pause_partitions(pointer, $0) }
    }

    func resume(_ partitions: some Collection<KafkaTopicPartition>) {
        _ = RDKafkaTopicPartitionList(partitions).withPointer { rd_kafka_resume_partitions(pointer, $0) }
    }

    /// Commits synchronously; a partition's own error is thrown too.
    func commit(_ offsets: [KafkaTopicPartitionOffset]) throws(KafkaError) {
        let list = RDKafkaTopicPartitionList(offsets)
        let err = list.withPointer { rd_kafka_commit(pointer, $0, 0) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
        if let partitionError = list.firstError { throw partitionError }
    }

    /// The group's committed offset of each partition with its metadata (a negative offset where
    /// none is stored).
    func committed(
        _ partitions: [KafkaTopicPartition], timeout: Duration
    ) throws(KafkaError) -> [KafkaTopicPartitionOffset] {
        let list = RDKafkaTopicPartitionList(partitions)
        let err = list.withPointer { rd_kafka_committed(pointer, $0, Int32(clamping: timeout.milliseconds)) }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
        return list.offsetsWithMetadata
    }
}

/// One rebalance as librdkafka hands it to the rebalance callback, valid during the callback only:
/// what happens to which partitions, and the calls that carry it out.
struct RDKafkaRebalance {
    enum Event {
        case assign
        case revoke
        case failed(KafkaError)
    }

    let consumer: RDKafkaConsumerHandle
    let event: Event
    let partitions: [KafkaTopicPartition]
    private let list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init(
        handle: OpaquePointer, event err: rd_kafka_resp_err_t,
        list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        self.consumer = RDKafkaConsumerHandle(pointer: handle)
        self.list = list
        self.partitions = RDKafkaTopicPartitionList.partitions(of: list)
        switch err {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS: self.event = .assign
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS: self.event = .revoke
        default: self.event = .failed(KafkaError(err))
        }
    }

    /// The group's protocol moves partitions one by one (cooperative), not all at once (eager); `nil`
    /// when librdkafka no longer says (`rd_kafka_rebalance_protocol` answers NULL once the group is
    /// being torn down, as in the revocation a close brings: read as a C string, that NULL crashed
    /// the process).
    var isCooperative: Bool? {
        rd_kafka_rebalance_protocol(consumer.pointer).map { String(cString: $0) == "COOPERATIVE" }
    }

    /// The revoked partitions were lost (the member left the group without handing them over).
    var isLost: Bool { rd_kafka_assignment_lost(consumer.pointer) != 0 }

    /// Takes the assigned partitions (incrementally under the cooperative protocol).
    func assign() -> KafkaError? {
        let cooperative = isCooperative
        if cooperative != false {
            let refused = incremental(rd_kafka_incremental_assign)
            // Protocol unknown: under the eager protocol the incremental call is refused and changes
            // nothing; the eager one below then applies.
            if refused == nil || cooperative == true { return refused }
        }
        let err = rd_kafka_assign(consumer.pointer, list)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(err)
    }

    /// Lets the revoked partitions go (all of them under an eager protocol).
    func unassign() -> KafkaError? {
        let cooperative = isCooperative
        if cooperative != false {
            let refused = incremental(rd_kafka_incremental_unassign)
            if refused == nil || cooperative == true { return refused }
        }
        let err = rd_kafka_assign(consumer.pointer, nil)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(err)
    }

    /// An incremental (cooperative) assign or unassign of `list`; its error, if refused.
    private func incremental(
        _ call: (OpaquePointer?, UnsafePointer<rd_kafka_topic_partition_list_t>?) -> OpaquePointer?
    ) -> KafkaError? {
        call(consumer.pointer, list).map { KafkaError(consuming: $0) }
    }

    /// Drops the whole assignment (after a failed rebalance).
    func dropAssignment() {
        _ = rd_kafka_assign(consumer.pointer, nil)
    }
}
