import Foundation
import JSONSchema

/// The `outcome` of a result event (the outcome table of docs/events.md).
package enum ResultOutcome: String, Sendable, Hashable, CaseIterable {
    case delivered, unregistered, rejected, failed, expired, invalid
}

/// How one consumed event ended: everything its result event and dead letter say.
package struct EventResult: Sendable {
    package var eventID: String?
    package var apnsID: String?
    /// A broadcast's `apns-request-id` as APNs answered it.
    package var apnsRequestID: String?
    /// `apns-unique-id`: APNs' id of the request in its delivery log (broadcasts; device pushes in
    /// the development environment).
    package var apnsUniqueID: String?
    package var outcome: ResultOutcome
    /// The HTTP status of APNs' last answer, if any.
    package var status: Int?
    /// APNs' reason, or for invalid events the rule broken.
    package var reason: String?
    package var detail: String?
    /// For unregistered: when APNs last confirmed the token invalid (ms since 1970).
    package var apnsTimestamp: Int64?
    /// Requests sent to APNs.
    package var attempts: Int
    /// How many times the event was replayed from the dead-letter topic (its `dlq-replay-count`).
    package var replays = 0
    package var metadata: JSONValue?
    /// The configured credential it was sent with (metrics only; not in the result event).
    package var credential: String?
    /// Set when the event also goes to the dead-letter topic.
    package var deadLetter: DeadLetterReason?
    package var firstFailureAt: Date?
    package var lastFailureAt: Date?

    package init(eventID: String?, outcome: ResultOutcome, attempts: Int) {
        self.eventID = eventID
        self.outcome = outcome
        self.attempts = attempts
    }
}
