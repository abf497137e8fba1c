import Foundation
import JSONSchema

/// The `outcome` of a result event (the outcome table of docs/events.md).
public enum ResultOutcome: String, Sendable, Hashable, CaseIterable {
    case delivered, unregistered, rejected, failed, expired, invalid
}

/// How one consumed event ended: everything its result event and dead letter say.
public struct EventResult: Sendable {
    public var eventID: String?
    public var apnsID: String?
    /// A broadcast's `apns-request-id` as APNs answered it.
    public var apnsRequestID: String?
    /// `apns-unique-id`: APNs' id of the request in its delivery log (broadcasts; device pushes in
    /// the development environment).
    public var apnsUniqueID: String?
    public var outcome: ResultOutcome
    /// The HTTP status of APNs' last answer, if any.
    public var status: Int?
    /// APNs' reason, or for invalid events the rule broken.
    public var reason: String?
    public var detail: String?
    /// For unregistered: when APNs last confirmed the token invalid (ms since 1970).
    public var apnsTimestamp: Int64?
    /// Requests sent to APNs.
    public var attempts: Int
    /// How many times the event was replayed from the dead-letter topic (its `dlq-replay-count`).
    public var replays = 0
    public var metadata: JSONValue?
    /// The configured credential it was sent with (metrics only; not in the result event).
    public var credential: String?
    /// Set when the event also goes to the dead-letter topic.
    public var deadLetter: DeadLetterReason?
    public var firstFailureAt: Date?
    public var lastFailureAt: Date?

    public init(eventID: String?, outcome: ResultOutcome, attempts: Int) {
        self.eventID = eventID
        self.outcome = outcome
        self.attempts = attempts
    }
}
