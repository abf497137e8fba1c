import Foundation
import Kafka

/// The headers a dead letter carries on top of the original record's (see
/// `schemas/dead-letter-headers.md`). Values are UTF-8 text; times are RFC 3339 UTC with milliseconds.
package enum DeadLetterHeader {
    package static let reason = "dlq-reason"
    package static let detail = "dlq-detail"
    package static let eventID = "dlq-event-id"
    package static let sourceTopic = "dlq-source-topic"
    package static let sourcePartition = "dlq-source-partition"
    package static let sourceOffset = "dlq-source-offset"
    package static let consumerGroup = "dlq-consumer-group"
    package static let attempts = "dlq-attempts"
    package static let firstFailureAt = "dlq-first-failure-at"
    package static let lastFailureAt = "dlq-last-failure-at"
    /// Set on a dead letter Kafka refused as it was (too large for the topic, refused by its
    /// rules): the value is Kafka's error name, and the record carries no value (and, where the
    /// original was missing or too long, a generated key), so it cannot be replayed.
    package static let degraded = "dlq-degraded"
    /// With `degraded`: the original value's and key's sizes in bytes.
    package static let originalValueBytes = "dlq-original-value-bytes"
    package static let originalKeyBytes = "dlq-original-key-bytes"
    /// Added by replay, kept through later dead-lettering, so a poison event cannot loop forever.
    package static let replayCount = "dlq-replay-count"

    /// The earlier dead-letterings of a replayed event, oldest first: `reason@last-failure-at`
    /// entries separated by commas, at most `historyLimit` (the oldest are dropped).
    package static let history = "dlq-history"
    package static let historyLimit = 10

    /// `headers`' history with `entry` appended.
    static func appendHistory(_ entry: String, to headers: [KafkaHeader]) -> String {
        var entries = headers.lastString(history).map { $0.split(separator: ",").map(String.init) } ?? []
        entries.append(entry)
        return entries.suffix(historyLimit).joined(separator: ",")
    }

    /// Every header the worker adds starts with this.
    package static let prefix = "dlq-"
}

/// Why an event was dead-lettered: the `dlq-reason` value.
package enum DeadLetterReason: String, Sendable, Hashable, CaseIterable {
    /// The value is not JSON (or not UTF-8, or nested too deep).
    case malformedJSON = "malformed-json"
    /// The value is larger than `delivery.maxRecordBytes`: never parsed, never sent.
    case recordTooLarge = "record-too-large"
    /// The value fails the notification-event schema.
    case schema
    /// An APNs rule checked in code is broken (payload size, collapse id bytes, …).
    case rule
    /// APNs refused the provider's credentials: fix them, then replay.
    case credentials
    /// No configured credential matches the event's topic: configure one, then replay.
    case noCredential = "no-credential"
    /// APNs kept answering "later", or the transport kept failing.
    case retriesExhausted = "retries-exhausted"

    /// The reason as a user may write it: the `dlq-reason` spelling (`malformed-json`), or the
    /// result's `reason` that names the same thing (`malformedJSON`, `recordTooLarge`,
    /// `noCredentialForTopic`) or the case's own name (`retriesExhausted`); `nil` for anything else.
    /// A result's specific reason that only belongs to a category (`payloadTooLarge` is one `rule`)
    /// is not one: it would select every dead letter of the category.
    package init?(spelling: String) {
        if let exact = DeadLetterReason(rawValue: spelling) {
            self = exact
            return
        }
        switch spelling {
        case "malformedJSON": self = .malformedJSON
        case "recordTooLarge": self = .recordTooLarge
        case "noCredential", "noCredentialForTopic": self = .noCredential
        case "retriesExhausted": self = .retriesExhausted
        default: return nil
        }
    }
}

/// RFC 3339 timestamps in UTC with milliseconds, as the dead-letter headers carry them.
enum DeadLetterTime {
    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func format(_ date: Date) -> String { date.formatted(style) }

    /// Accepts the timestamp with or without fractional seconds.
    static func parse(_ text: String) -> Date? { try? Date(text, strategy: style) }
}

/// Parses the RFC 3339 times users give on the command line (`--since`, `--until`).
package enum DeadLetterTimeParsing {
    package static func date(_ text: String) -> Date? { DeadLetterTime.parse(text) }

    /// A time an operator types (`replay --since`, `--until`): RFC 3339, or a date alone
    /// (`2026-12-02`: that day's start in UTC).
    package static func argument(_ text: String) -> Date? {
        if let date = DeadLetterTime.parse(text) { return date }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let components = DateComponents(year: year, month: month, day: day)
        guard components.isValidDate(in: calendar) else { return nil }
        return calendar.date(from: components)
    }

    /// What `argument` takes, for an error message.
    package static let argumentExample = "for example 2026-12-02T09:30:00Z, or 2026-12-02 for that day's start in UTC"
}
