import Foundation

/// What librdkafka's statistics say about this consumer's partitions: lag is the number of records
/// between the last committed offset and the partition's end.
package struct KafkaConsumerStatistics: Sendable, Hashable {
    package struct Partition: Sendable, Hashable {
        /// Records not yet consumed-and-committed; `nil` while librdkafka does not know.
        package var consumerLag: Int64?
        package var committedOffset: Int64?
        package var highWatermark: Int64?
    }

    package var partitions: [KafkaTopicPartition: Partition]

    /// The sum of known lags.
    package var totalLag: Int64 {
        partitions.values.reduce(0) { $0 + max($1.consumerLag ?? 0, 0) }
    }

    /// Parses librdkafka's statistics JSON (`statistics.interval.ms`); `nil` if it is not that JSON.
    package init?(json: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
            let topics = object["topics"] as? [String: Any]
        else { return nil }
        var partitions: [KafkaTopicPartition: Partition] = [:]
        for (topic, value) in topics {
            guard let topicStats = value as? [String: Any],
                let partitionStats = topicStats["partitions"] as? [String: Any]
            else { continue }
            for (key, value) in partitionStats {
                // Partition -1 is librdkafka's internal "unassigned" bucket.
                guard let id = Int32(key), id >= 0, let stats = value as? [String: Any] else { continue }
                // Only partitions this member fetches carry meaningful numbers.
                guard (stats["fetch_state"] as? String).map({ $0 != "none" }) ?? false else { continue }
                func number(_ name: String) -> Int64? {
                    guard let value = (stats[name] as? NSNumber)?.int64Value, value >= 0 else { return nil }
                    return value
                }
                partitions[KafkaTopicPartition(topic: topic, partition: id)] = Partition(
                    consumerLag: number("consumer_lag"), committedOffset: number("committed_offset"),
                    highWatermark: number("hi_offset"))
            }
        }
        self.partitions = partitions
    }
}
