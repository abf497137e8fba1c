import Foundation
import JSONSchema
import Kafka

/// The result event published for every consumed event (`schemas/result-event.schema.json`),
/// keyed by the event id so that downstream consumers can drop the duplicates a crash may cause.
enum ResultEvent {
    /// The record for the response topic.
    static func message(
        for result: EventResult, source: KafkaConsumerMessage, latency: Duration, completedAt: Date, topic: String
    ) -> KafkaProducerMessage {
        var members: [(String, JSONValue)] = [
            ("eventId", result.eventID.map(JSONValue.string) ?? .null),
            ("apnsId", result.apnsID.map(JSONValue.string) ?? .null),
            ("outcome", .string(result.outcome.rawValue)),
            ("status", result.status.map { .number(JSONNumber($0)) } ?? .null),
            ("reason", result.reason.map(JSONValue.string) ?? .null),
        ]
        if let detail = result.detail { members.append(("detail", .string(detail))) }
        if let timestamp = result.apnsTimestamp { members.append(("apnsTimestamp", .number(JSONNumber(int64: timestamp)))) }
        let milliseconds = (Double(latency.components.seconds) * 1000 + Double(latency.components.attoseconds) / 1e15)
        members += [
            ("attempts", .number(JSONNumber(result.attempts))),
            ("latencyMs", .number(JSONNumber((milliseconds * 1000).rounded() / 1000) ?? JSONNumber(0))),
            ("completedAt", .string(DeadLetterTime.format(completedAt))),
            ("source", .object(JSONObject([
                ("topic", .string(source.topic)),
                ("partition", .number(JSONNumber(Int(source.partition)))),
                ("offset", .number(JSONNumber(int64: source.offset))),
            ]))),
        ]
        if let metadata = result.metadata { members.append(("metadata", metadata)) }
        let value = JSONValue.object(JSONObject(members))
        // Keyed by event id; an invalid event whose id could not be read keeps its record's key.
        let key = result.eventID.map { Array($0.utf8) } ?? source.key
        return KafkaProducerMessage(
            topic: topic, key: key, value: value.serialized(),
            headers: [KafkaHeader(key: "content-type", string: "application/json")])
    }
}
