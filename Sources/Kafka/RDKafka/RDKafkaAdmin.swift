internal import CRdKafka

extension RDKafkaClient {
    /// Every topic the cluster reports, with its partition count and replication factor (the fewest
    /// replicas any of its partitions has). Asks for all topics, so that asking never creates one.
    /// Blocks up to `timeout`.
    func topicDescriptions(timeout: Duration) throws(KafkaError) -> [String: KafkaTopicDescription] {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 1, nil, &metadata, Int32(clamping: timeout.milliseconds))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { throw KafkaError(err) }
        defer { rd_kafka_metadata_destroy(metadata) }
        var topics: [String: KafkaTopicDescription] = [:]
        for index in 0..<Int(metadata.pointee.topic_cnt) {
            let topic = metadata.pointee.topics[index]
            guard topic.err == RD_KAFKA_RESP_ERR_NO_ERROR, let name = topic.topic.map({ String(cString: $0) }) else {
                continue
            }
            let replicas = (0..<Int(topic.partition_cnt)).map { Int(topic.partitions[$0].replica_cnt) }
            topics[name] = KafkaTopicDescription(
                name: name, partitions: Int(topic.partition_cnt), replicationFactor: replicas.min() ?? 0)
        }
        return topics
    }

    /// The named configuration entries of each topic, by DescribeConfigs. A topic the broker
    /// answered with an error maps to that error; a broker that does not implement DescribeConfigs
    /// (librdkafka's mock cluster) throws. Blocks up to `timeout`.
    func topicConfigs(
        _ topics: [String], names: Set<String>, timeout: Duration
    ) throws(KafkaError) -> [String: Result<[String: String], KafkaError>] {
        guard !topics.isEmpty else { return [:] }
        let queue = rd_kafka_queue_new(handle)!
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS)!
        defer { rd_kafka_AdminOptions_destroy(options) }
        var errstr = [CChar](repeating: 0, count: 512)
        _ = rd_kafka_AdminOptions_set_request_timeout(
            options, Int32(clamping: timeout.milliseconds), &errstr, errstr.count)
        var resources: [OpaquePointer?] = topics.map { rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, $0) }
        defer { for resource in resources { rd_kafka_ConfigResource_destroy(resource) } }
        resources.withUnsafeMutableBufferPointer { buffer in
            rd_kafka_DescribeConfigs(handle, buffer.baseAddress, buffer.count, options, queue)
        }
        // The request's own timeout ends it; the extra second only covers the hand-back.
        guard let event = rd_kafka_queue_poll(queue, Int32(clamping: timeout.milliseconds + 1000)) else {
            throw KafkaError(code: .timedOut, message: "DescribeConfigs was not answered in time")
        }
        defer { rd_kafka_event_destroy(event) }
        let err = rd_kafka_event_error(event)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(err, rd_kafka_event_error_string(event).map { String(cString: $0) })
        }
        guard let result = rd_kafka_event_DescribeConfigs_result(event) else {
            throw KafkaError(code: .state, message: "DescribeConfigs returned no result")
        }
        var count = 0
        guard let answered = rd_kafka_DescribeConfigs_result_resources(result, &count) else { return [:] }
        var configs: [String: Result<[String: String], KafkaError>] = [:]
        for index in 0..<count {
            guard let resource = answered[index] else { continue }
            let name = String(cString: rd_kafka_ConfigResource_name(resource))
            let resourceError = rd_kafka_ConfigResource_error(resource)
            guard resourceError == RD_KAFKA_RESP_ERR_NO_ERROR else {
                let message = rd_kafka_ConfigResource_error_string(resource).map { String(cString: $0) }
                configs[name] = .failure(KafkaError(resourceError, message))
                continue
            }
            var entryCount = 0
            var values: [String: String] = [:]
            if let entries = rd_kafka_ConfigResource_configs(resource, &entryCount) {
                for entryIndex in 0..<entryCount {
                    guard let entry = entries[entryIndex] else { continue }
                    let entryName = String(cString: rd_kafka_ConfigEntry_name(entry))
                    guard names.contains(entryName), let value = rd_kafka_ConfigEntry_value(entry) else { continue }
                    values[entryName] = String(cString: value)
                }
            }
            configs[name] = .success(values)
        }
        return configs
    }

    /// Serves the handle's queued callbacks (errors, logs) without waiting.
    func serveCallbacks() {
        _ = rd_kafka_poll(handle, 0)
    }
}
