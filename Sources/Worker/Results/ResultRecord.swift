import Foundation
import JSONSchema
import Kafka

/// The record of the result published for every consumed event (`schemas/result-event.schema.json`),
/// keyed by the event id so that downstream consumers can drop the duplicates a crash may cause.
package enum ResultRecord {
    /// The record for the results topic; `trace`: the source record's trace context to carry
    /// (`TraceContext`), after `content-type`.
    static func message(
        for result: EventResult, source: KafkaConsumerMessage, latency: Duration, completedAt: Date, topic: String,
        trace: [KafkaHeader] = []
    ) -> KafkaProducerMessage {
        // Keyed by event id; an invalid event whose id could not be read, or is empty (no key to
        // partition or compact by), keeps its record's key.
        let key = result.eventID.flatMap { $0.isEmpty ? nil : Array($0.utf8) } ?? source.key
        return KafkaProducerMessage(
            topic: topic, key: key,
            value: value(for: result, source: source, latency: latency, completedAt: completedAt),
            headers: trace.isEmpty ? headers : headers + trace)
    }

    /// Every result's headers: built once, so a result shares them instead of allocating its own.
    static let headers = [contentType]
    static let contentType = KafkaHeader(key: "content-type", string: "application/json")

    /// The header a degraded result carries: Kafka's error name for why the full one was refused.
    static let degradedHeader = "apns-worker-degraded"
    /// The longest `detail` a degraded result keeps, in characters.
    static let degradedDetailLimit = 200

    /// The result Kafka refused as it was (`error`: too large, refused by the topic's rules), made
    /// small: no `metadata`, `detail` cut short, the event id as key only where it is a short one
    /// (otherwise the source record's coordinates), a header saying why, and the trace context the
    /// full result carried (`trace`).
    static func degraded(
        for result: EventResult, source: KafkaConsumerMessage, latency: Duration, completedAt: Date, topic: String,
        trace: [KafkaHeader], error: KafkaError
    ) -> KafkaProducerMessage {
        var result = result
        result.metadata = nil
        if let detail = result.detail, detail.count > degradedDetailLimit {
            result.detail = String(detail.prefix(degradedDetailLimit)) + "…"
        }
        if let id = result.eventID, id.utf8.count > DeadLetterRecord.degradedKeyLimit { result.eventID = nil }
        return KafkaProducerMessage(
            topic: topic, key: result.eventID.map { Array($0.utf8) } ?? DeadLetterRecord.sourceKey(source),
            value: value(for: result, source: source, latency: latency, completedAt: completedAt),
            headers: [
                contentType,
                KafkaHeader(key: degradedHeader, string: error.code.name),
            ] + trace)
    }

    /// The JSON text, written straight into bytes: one result per event makes a tree of
    /// `JSONValue`s and its serializer a visible share of the worker's CPU.
    package static func value(
        for result: EventResult, source: KafkaConsumerMessage, latency: Duration, completedAt: Date
    ) -> [UInt8] {
        // One buffer, grown at most for the metadata: every copy of it while it is being written
        // (a second owner, then an append) would cost an allocation and a copy.
        var writer = ObjectWriter(capacity: 384)
        writer.member("eventId", string: result.eventID)
        writer.member("apnsId", string: result.apnsID)
        if let requestID = result.apnsRequestID { writer.member("apnsRequestId", string: requestID) }
        if let uniqueID = result.apnsUniqueID { writer.member("apnsUniqueId", string: uniqueID) }
        writer.member("outcome", string: result.outcome.rawValue)
        writer.member("status", integer: result.status.map(Int64.init))
        writer.member("reason", string: result.reason)
        if let detail = result.detail { writer.member("detail", string: detail) }
        // The dead letter's category, spelled as its dlq-reason header and the dead-letter metric's
        // label: what joins a result with its dead letter.
        if let letter = result.deadLetter { writer.member("deadLetterReason", string: letter.rawValue) }
        if let timestamp = result.apnsTimestamp { writer.member("apnsTimestamp", integer: timestamp) }
        writer.member("attempts", integer: Int64(result.attempts))
        if result.replays > 0 { writer.member("replays", integer: Int64(result.replays)) }
        writer.key("latencyMs")
        writeMilliseconds(latency, into: &writer.out)
        writer.key("completedAt")
        writer.out.append(UInt8(ascii: "\""))
        RFC3339.write(completedAt, into: &writer.out)
        writer.out.append(UInt8(ascii: "\""))
        writer.key("source")
        writer.open()
        writer.member("topic", string: source.topic)
        writer.member("partition", integer: Int64(source.partition))
        writer.member("offset", integer: source.offset)
        writer.close()
        if let metadata = result.metadata {
            writer.key("metadata")
            metadata.write(into: &writer.out)
        }
        return writer.finish()
    }

    /// Milliseconds with up to three decimals, in the shortest form (`12`, `12.5`, `12.345`).
    static func writeMilliseconds(_ duration: Duration, into out: inout [UInt8]) {
        let (seconds, attoseconds) = duration.components
        let micros = max(0, seconds * 1_000_000 + (attoseconds + 500_000_000_000) / 1_000_000_000_000)
        out.append(contentsOf: String(micros / 1000).utf8)
        var fraction = micros % 1000
        guard fraction > 0 else { return }
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        out.append(UInt8(ascii: "."))
        let text = String(fraction)
        for _ in text.utf8.count..<digits { out.append(UInt8(ascii: "0")) }
        out.append(contentsOf: text.utf8)
    }

    /// `{"a":…,"b":…}` member by member, objects inside it with `open()` and `close()`.
    struct ObjectWriter {
        var out: [UInt8] = []
        private var first = true

        init(capacity: Int) {
            out.reserveCapacity(capacity)
            out.append(UInt8(ascii: "{"))
        }

        /// Starts an object as the value of the member whose `key` was just written.
        mutating func open() {
            out.append(UInt8(ascii: "{"))
            first = true
        }

        mutating func close() {
            out.append(UInt8(ascii: "}"))
            first = false
        }

        mutating func key(_ name: String) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSONValue.writeString(name, into: &out)
            out.append(UInt8(ascii: ":"))
        }

        mutating func member(_ name: String, string: String?) {
            key(name)
            if let string { JSONValue.writeString(string, into: &out) } else { out.append(contentsOf: "null".utf8) }
        }

        mutating func member(_ name: String, integer: Int64?) {
            key(name)
            out.append(contentsOf: (integer.map { String($0) } ?? "null").utf8)
        }

        mutating func finish() -> [UInt8] {
            out.append(UInt8(ascii: "}"))
            return out
        }
    }
}

/// RFC 3339 UTC with milliseconds (`2026-11-23T08:15:17.123Z`), as `DeadLetterTime` formats it,
/// without Foundation's formatter (a few microseconds a call, once per result event).
enum RFC3339 {
    static func write(_ date: Date, into out: inout [UInt8]) {
        // Whole seconds, then the fraction truncated to milliseconds, as Foundation's formatter does
        // (1.123 is stored as 1.12299…, written .122).
        let time = date.timeIntervalSince1970
        let seconds = time.rounded(.down)
        let milliseconds = min(999, Int64((time - seconds) * 1000))
        let wholeSeconds = Int64(seconds)
        var days = wholeSeconds / 86_400
        var secondOfDay = wholeSeconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let rest = secondOfDay * 1000 + milliseconds
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            var value = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                value %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        out.append(UInt8(ascii: "-"))
        digits(month, 2)
        out.append(UInt8(ascii: "-"))
        digits(day, 2)
        out.append(UInt8(ascii: "T"))
        digits(rest / 3_600_000, 2)
        out.append(UInt8(ascii: ":"))
        digits(rest / 60_000 % 60, 2)
        out.append(UInt8(ascii: ":"))
        digits(rest / 1000 % 60, 2)
        out.append(UInt8(ascii: "."))
        digits(rest % 1000, 3)
        out.append(UInt8(ascii: "Z"))
    }
}
