internal import CRdKafka

extension RDKafkaClient {
    /// Each partition's position: the offset after the last record the consumer handed out.
    /// Partitions without one yet (nothing read since they were assigned) are left out.
    func positions(of partitions: some Collection<KafkaTopicPartition>) -> [KafkaTopicPartition: Int64] {
        guard !partitions.isEmpty else { return [:] }
        let list = RDKafkaTopicPartitionList(partitions)
        return list.withPointer { pointer in
            guard rd_kafka_position(handle, pointer) == RD_KAFKA_RESP_ERR_NO_ERROR else { return [:] }
            var positions: [KafkaTopicPartition: Int64] = [:]
            for (partition, offset, err) in RDKafkaTopicPartitionList.entries(of: pointer)
            where err == RD_KAFKA_RESP_ERR_NO_ERROR && offset >= 0 {
                positions[partition] = offset
            }
            return positions
        }
    }

    /// Restarts a partition's fetch at `offset` (asynchronously: the call does not wait for it).
    /// What librdkafka had fetched beyond and not handed out is dropped and fetched again.
    func seek(_ offset: KafkaTopicPartitionOffset) throws(KafkaError) {
        let list = RDKafkaTopicPartitionList([offset])
        if let error = list.withPointer({ rd_kafka_seek_partitions(handle, $0, 0) }) {
            throw KafkaError(consuming: error)
        }
        // An asynchronous seek answers each partition with `_IN_PROGRESS`: started, not failed.
        for (partition, _, err) in list.withPointer({ RDKafkaTopicPartitionList.entries(of: $0) })
        where err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__IN_PROGRESS {
            throw KafkaError(err, "\(partition): " + String(cString: rd_kafka_err2str(err)))
        }
    }
}
