import APNs
import JSONSchema

/// A consumed event that passed the schema and every APNs rule: ready to send.
package struct NotificationEvent: Sendable {
    /// The producer's id; keys the result event.
    package let id: String
    package let environment: APNsEnvironment
    /// What goes to APNs: a notification to the event's `deviceToken`, or a Live Activity broadcast
    /// to its `channelId`. Its `apns-id` (a broadcast's `apns-request-id`) is the event id when that
    /// is a UUID, else `nil` (APNs picks).
    package let push: APNsPush
    /// Copied into the result event untouched; never sent to APNs.
    package let metadata: JSONValue?

    package init(id: String, environment: APNsEnvironment, push: APNsPush, metadata: JSONValue?) {
        self.id = id
        self.environment = environment
        self.push = push
        self.metadata = metadata
    }

    /// The notification, when the event targets one device.
    package var notification: APNsNotification? {
        if case .notification(let notification) = push { return notification }
        return nil
    }

    /// The broadcast, when the event targets a channel.
    package var broadcast: APNsBroadcast? {
        if case .broadcast(let broadcast) = push { return broadcast }
        return nil
    }
}
