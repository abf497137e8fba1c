import Foundation

/// What librdkafka's statistics say about this consumer's partitions: lag is the number of records
/// between the last committed offset and the partition's end.
package struct KafkaConsumerStatistics: Sendable, Hashable {
    package struct Partition: Sendable, Hashable {
        /// Records not yet consumed-and-committed; `nil` while librdkafka does not know.
        package var consumerLag: Int64?
        package var committedOffset: Int64?
        package var highWatermark: Int64?
        package var lowWatermark: Int64? = nil

        /// Records behind the partition's end: librdkafka's `consumer_lag`, or, while it has none
        /// (an assigned partition that has delivered nothing yet, an empty one), the end less the
        /// committed offset, or less the partition's start when nothing is committed (the worker
        /// reads a new group's partitions from the start).
        package var lag: Int64? {
            if let consumerLag { return consumerLag }
            guard let highWatermark else { return nil }
            guard let from = committedOffset ?? lowWatermark else { return nil }
            return max(highWatermark - from, 0)
        }
    }

    package var partitions: [KafkaTopicPartition: Partition]

    /// The sum of known lags.
    package var totalLag: Int64 {
        partitions.values.reduce(0) { $0 + max($1.lag ?? 0, 0) }
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
                    highWatermark: number("hi_offset"), lowWatermark: number("lo_offset"))
            }
        }
        self.partitions = partitions
    }
}
