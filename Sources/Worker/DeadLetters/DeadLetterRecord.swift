import Foundation
import Kafka

/// A dead letter: the consumed record with its key and value untouched, its headers kept in order,
/// and the worker's `dlq-*` headers added after them (`schemas/dead-letter-headers.md`).
enum DeadLetterRecord {
    static func message(
        for source: KafkaConsumerMessage, result: EventResult, reason: DeadLetterReason, consumerGroup: String,
        topic: String, now: Date
    ) -> KafkaProducerMessage {
        // A record replayed earlier carries old dlq-* headers: drop them (the replay counter stays,
        // so a poison event still hits the replay limit), then describe this failure.
        var headers = source.headers.filter {
            !$0.key.hasPrefix(DeadLetterHeader.prefix) || $0.key == DeadLetterHeader.replayCount
        }
        func add(_ key: String, _ value: String) { headers.append(KafkaHeader(key: key, string: value)) }
        add(DeadLetterHeader.reason, reason.rawValue)
        add(DeadLetterHeader.detail, result.detail ?? result.reason ?? reason.rawValue)
        if let eventID = result.eventID { add(DeadLetterHeader.eventID, eventID) }
        add(DeadLetterHeader.sourceTopic, source.topic)
        add(DeadLetterHeader.sourcePartition, String(source.partition))
        add(DeadLetterHeader.sourceOffset, String(source.offset))
        add(DeadLetterHeader.consumerGroup, consumerGroup)
        add(DeadLetterHeader.attempts, String(result.attempts))
        add(DeadLetterHeader.firstFailureAt, DeadLetterTime.format(result.firstFailureAt ?? now))
        add(DeadLetterHeader.lastFailureAt, DeadLetterTime.format(result.lastFailureAt ?? now))
        return KafkaProducerMessage(topic: topic, key: source.key, value: source.value, headers: headers)
    }
}
