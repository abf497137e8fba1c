import APNs
import JSONSchema

/// A consumed event that passed the schema and every APNs rule: ready to send.
public struct NotificationEvent: Sendable {
    /// The producer's id; keys the result event.
    public let id: String
    public let environment: APNsEnvironment
    /// What goes to APNs: a notification to the event's `deviceToken`, or a Live Activity broadcast
    /// to its `channelId`. Its `apns-id` (a broadcast's `apns-request-id`) is the event id when that
    /// is a UUID, else `nil` (APNs picks).
    public let push: APNsPush
    /// Copied into the result event untouched; never sent to APNs.
    public let metadata: JSONValue?

    public init(id: String, environment: APNsEnvironment, push: APNsPush, metadata: JSONValue?) {
        self.id = id
        self.environment = environment
        self.push = push
        self.metadata = metadata
    }

    public init(id: String, environment: APNsEnvironment, notification: APNsNotification, metadata: JSONValue?) {
        self.init(id: id, environment: environment, push: .notification(notification), metadata: metadata)
    }

    /// The notification, when the event targets one device.
    public var notification: APNsNotification? {
        if case .notification(let notification) = push { return notification }
        return nil
    }

    /// The broadcast, when the event targets a channel.
    public var broadcast: APNsBroadcast? {
        if case .broadcast(let broadcast) = push { return broadcast }
        return nil
    }
}
