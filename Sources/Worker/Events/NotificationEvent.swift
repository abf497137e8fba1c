import APNs
import JSONSchema

/// A consumed event that passed the schema and every APNs rule: ready to send.
public struct NotificationEvent: Sendable {
    /// The producer's id; keys the result event.
    public let id: String
    public let environment: APNsEnvironment
    /// What goes to APNs. Its `apnsID` is the event id when that is a UUID, else `nil` (APNs picks).
    public let notification: APNsNotification
    /// Copied into the result event untouched; never sent to APNs.
    public let metadata: JSONValue?

    public init(id: String, environment: APNsEnvironment, notification: APNsNotification, metadata: JSONValue?) {
        self.id = id
        self.environment = environment
        self.notification = notification
        self.metadata = metadata
    }
}
