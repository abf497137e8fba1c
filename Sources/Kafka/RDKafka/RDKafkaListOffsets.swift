internal import CRdKafka

extension RDKafkaClient {
    /// Each partition's end as ListOffsets answers it (the latest offset: one past the last record,
    /// or the last stable offset for a `read_committed` client, as `rd_kafka_query_watermark_offsets`
    /// answers it for this client): one admin request per partition, all in flight at once on this
    /// handle, each answer handed to `answered` as it arrives, on the calling thread. One request for
    /// them all would wait for the slowest leader; this way a slow broker delays only its own
    /// partitions. Blocks until every partition is answered or `timeout` has passed; a partition not
    /// answered by then is not handed over (its request ends on its own timeout, its answer dropped
    /// with the queue).
    func ends(
        of partitions: [KafkaTopicPartition], timeout: Duration,
        answered: (KafkaTopicPartition, Result<Int64, KafkaError>) -> Void
    ) {
        guard !partitions.isEmpty else { return }
        let deadline = ContinuousClock.now + timeout
        let queue = rd_kafka_queue_new(handle)!
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_LISTOFFSETS)!
        defer { rd_kafka_AdminOptions_destroy(options) }
        var errstr = [CChar](repeating: 0, count: 512)
        _ = rd_kafka_AdminOptions_set_request_timeout(
            options, Int32(clamping: timeout.milliseconds), &errstr, errstr.count)
        let isolation =
            readsCommitted ? RD_KAFKA_ISOLATION_LEVEL_READ_COMMITTED : RD_KAFKA_ISOLATION_LEVEL_READ_UNCOMMITTED
        if let refused = rd_kafka_AdminOptions_set_isolation_level(options, isolation) {
            rd_kafka_error_destroy(refused)
        }
        for (index, partition) in partitions.enumerated() {
            // An answer names its partition only when it carries one (not when the leader could not
            // be found): each request carries its index as the opaque its answer gives back. The
            // options are copied into the request, so one value serves every request.
            rd_kafka_AdminOptions_set_opaque(options, UnsafeMutableRawPointer(bitPattern: index + 1))
            let latest = KafkaTopicPartitionOffset(partition, offset: Int64(RD_KAFKA_OFFSET_SPEC_LATEST.rawValue))
            RDKafkaTopicPartitionList([latest]).withPointer { rd_kafka_ListOffsets(handle, $0, options, queue) }
        }
        var pending = Set(partitions.indices)
        while !pending.isEmpty {
            let left = deadline - .now
            guard left > .zero else { return }
            guard let event = rd_kafka_queue_poll(queue, Int32(clamping: max(left.milliseconds, 1))) else { continue }
            defer { rd_kafka_event_destroy(event) }
            let index = Int(bitPattern: rd_kafka_event_opaque(event)) - 1
            guard pending.remove(index) != nil else { continue }
            answered(partitions[index], Self.end(in: event, of: partitions[index]))
        }
    }

    /// The one partition's answer in a ListOffsets result event.
    private static func end(in event: OpaquePointer, of partition: KafkaTopicPartition) -> Result<Int64, KafkaError> {
        let err = rd_kafka_event_error(event)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            let text = rd_kafka_event_error_string(event).map { String(cString: $0) }
            return .failure(KafkaError(err, "\(partition): " + (text ?? String(cString: rd_kafka_err2str(err)))))
        }
        var count = 0
        guard let result = rd_kafka_event_ListOffsets_result(event),
            let infos = rd_kafka_ListOffsets_result_infos(result, &count), count == 1, let info = infos[0],
            let answer = rd_kafka_ListOffsetsResultInfo_topic_partition(info)
        else {
            return .failure(KafkaError(code: .state, message: "\(partition): ListOffsets gave no answer for it"))
        }
        guard answer.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(
                KafkaError(answer.pointee.err, "\(partition): " + String(cString: rd_kafka_err2str(answer.pointee.err)))
            )
        }
        guard answer.pointee.offset >= 0 else {
            return .failure(KafkaError(code: .state, message: "\(partition): ListOffsets answered no offset"))
        }
        return .success(answer.pointee.offset)
    }

    /// Whether this client reads only committed records (`isolation.level`, librdkafka's default).
    private var readsCommitted: Bool {
        var value = [CChar](repeating: 0, count: 32)
        var size = value.count
        guard let conf = rd_kafka_conf(handle),
            rd_kafka_conf_get(conf, "isolation.level", &value, &size) == RD_KAFKA_CONF_OK
        else { return true }
        return String(cString: value) != "read_uncommitted"
    }
}
