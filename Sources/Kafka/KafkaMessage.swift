/// A record header. Kafka allows repeated keys and `nil` values; order is kept.
package struct KafkaHeader: Sendable, Hashable {
    package var key: String
    package var value: [UInt8]?

    package init(key: String, value: [UInt8]?) {
        self.key = key
        self.value = value
    }

    package init(key: String, string: String) {
        self.init(key: key, value: Array(string.utf8))
    }

    /// The value as UTF-8 text, when it is valid UTF-8.
    package var stringValue: String? {
        value.flatMap { String(validating: $0, as: UTF8.self) }
    }
}

extension Array where Element == KafkaHeader {
    /// The last value for `key` (Kafka keeps repeats; the latest one wins, as for HTTP-style lookups).
    package func last(_ key: String) -> [UInt8]? {
        last(where: { $0.key == key })?.value ?? nil
    }

    /// The last value for `key` as UTF-8 text.
    package func lastString(_ key: String) -> String? {
        last(where: { $0.key == key })?.stringValue
    }
}

/// A record read by a consumer: its bytes exactly as they are stored, and where they came from.
package struct KafkaConsumerMessage: Sendable, Hashable {
    /// What the record holds in memory, roughly: key, value and header bytes.
    package var byteCount: Int {
        (key?.count ?? 0) + (value?.count ?? 0) + headers.reduce(0) { $0 + $1.key.utf8.count + ($1.value?.count ?? 0) }
    }

    package var topic: String
    package var partition: Int32
    package var offset: Int64
    package var key: [UInt8]?
    package var value: [UInt8]?
    package var headers: [KafkaHeader]
    /// Milliseconds since the UNIX epoch (create or log-append time), when the broker gave one.
    package var timestampMilliseconds: Int64?
    /// The tenure the consumer fetched it in: its count of assignment changes then. The record belongs
    /// to its partition's current tenure if this is at least the tenure the partition was last
    /// assigned in (`KafkaRebalanceHandler.partitionsAssigned(_:tenure:)`); lower, it was fetched before
    /// the partition was revoked or lost, whatever happened since. 0 for a record no consumer stamped.
    package var tenure: UInt64 = 0

    package init(
        topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8]?,
        headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
    }

    package var topicPartition: KafkaTopicPartition { KafkaTopicPartition(topic: topic, partition: partition) }
}

/// A record to produce. `partition` `nil` lets the partitioner choose (by key hash when there is a key).
package struct KafkaProducerMessage: Sendable, Hashable {
    package var topic: String
    package var partition: Int32?
    package var key: [UInt8]?
    package var value: [UInt8]?
    package var headers: [KafkaHeader]
    package var timestampMilliseconds: Int64?

    package init(
        topic: String, partition: Int32? = nil, key: [UInt8]? = nil, value: [UInt8]?,
        headers: [KafkaHeader] = [], timestampMilliseconds: Int64? = nil
    ) {
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMilliseconds = timestampMilliseconds
    }
}

/// Kafka's acknowledgement of a produced record: where it was stored.
package struct KafkaDeliveryReport: Sendable, Hashable {
    package var topic: String
    package var partition: Int32
    package var offset: Int64
    package var timestampMilliseconds: Int64?
}
