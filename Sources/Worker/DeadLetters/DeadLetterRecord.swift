import Foundation
import Kafka

/// A dead letter: the consumed record with its key and value untouched, its headers kept in order,
/// and the worker's `dlq-*` headers added after them (`schemas/dead-letter-headers.md`).
enum DeadLetterRecord {
    /// `trace`: the worker's span's context (span export): it takes the place of the record's
    /// `traceparent` and `tracestate`, so that a replay continues the trace from the failed push;
    /// `nil`: the record's headers are kept as they were.
    static func message(
        for source: KafkaConsumerMessage, result: EventResult, reason: DeadLetterReason, consumerGroup: String,
        topic: String, now: Date, trace: [KafkaHeader]? = nil
    ) -> KafkaProducerMessage {
        // A replayed record carries its history: the replay counter (so a poison event still hits
        // the replay limit), the earlier reasons, and the first failure's time, which stays the
        // first. Any other dlq-* header is dropped; then this failure is described.
        let kept: Set<String> = [DeadLetterHeader.replayCount, DeadLetterHeader.history]
        let firstFailure = source.headers.lastString(DeadLetterHeader.firstFailureAt)
        var headers = source.headers.filter { !$0.key.hasPrefix(DeadLetterHeader.prefix) || kept.contains($0.key) }
        if let trace {
            headers.removeAll { $0.key == TraceContext.parentHeader || $0.key == TraceContext.stateHeader }
            headers += trace
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
        add(DeadLetterHeader.firstFailureAt, firstFailure ?? DeadLetterTime.format(result.firstFailureAt ?? now))
        add(DeadLetterHeader.lastFailureAt, DeadLetterTime.format(result.lastFailureAt ?? now))
        return KafkaProducerMessage(topic: topic, key: source.key, value: source.value, headers: headers)
    }

    /// Longest key a degraded record keeps: a key is part of the record's size, and a topic's limit
    /// may be far below librdkafka's 1 MB default.
    static let degradedKeyLimit = 256

    /// The dead letter Kafka refused as it was (`error`: too large, refused by the topic's rules),
    /// made small and valid: no value, only the `dlq-*` headers and the trace context
    /// (`TraceContext`: the original headers were part of its size, at most 567 bytes of them
    /// stay; `dlq-event-id` only up to 256 bytes, `dlq-detail` cut to 200 characters), the
    /// original sizes, and a key of its own where the original was missing or long (a compacted
    /// topic refuses a record without a key). Replay skips it: there is nothing to replay.
    static func degraded(_ message: KafkaProducerMessage, source: KafkaConsumerMessage, error: KafkaError)
        -> KafkaProducerMessage
    {
        // The event id only where it is a short one, and the detail cut short, as a degraded result
        // keeps them: an invalid event's id, and a detail naming one of its members, may be as long
        // as its record allows.
        // The trace context the full dead letter carries: the record's, or the worker's span's.
        var headers = TraceContext(headers: message.headers).headers
        for header in message.headers where header.key.hasPrefix(DeadLetterHeader.prefix) {
            switch header.key {
            case DeadLetterHeader.eventID where (header.value?.count ?? 0) > degradedKeyLimit:
                continue
            case DeadLetterHeader.detail:
                let detail = header.stringValue ?? ""
                let limit = ResultRecord.degradedDetailLimit
                headers.append(
                    detail.count > limit
                        ? KafkaHeader(key: header.key, string: String(detail.prefix(limit)) + "…") : header)
            default:
                headers.append(header)
            }
        }
        func add(_ key: String, _ value: String) { headers.append(KafkaHeader(key: key, string: value)) }
        add(DeadLetterHeader.degraded, error.code.name)
        add(DeadLetterHeader.originalValueBytes, String(source.value?.count ?? 0))
        add(DeadLetterHeader.originalKeyBytes, String(source.key?.count ?? 0))
        let key = source.key.flatMap { $0.count <= degradedKeyLimit ? $0 : nil } ?? sourceKey(source)
        return KafkaProducerMessage(topic: message.topic, key: key, value: nil, headers: headers)
    }

    /// `topic/partition/offset`: unique per consumed record, for a record that needs a key of its own.
    static func sourceKey(_ source: KafkaConsumerMessage) -> [UInt8] {
        Array("\(source.topic)/\(source.partition)/\(source.offset)".utf8)
    }
}
