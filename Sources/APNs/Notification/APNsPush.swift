/// One request to the push host: a notification to one device, or a Live Activity broadcast to
/// every device subscribed to a channel. What a caller that handles both (the worker) passes to
/// `APNsClient.send(_:completion:)` and in `APNsClient.BatchItem`s.
public enum APNsPush: Sendable, Hashable {
    case notification(APNsNotification)
    case broadcast(APNsBroadcast)

    /// The topic the credential is chosen by: the notification's `apns-topic`, or the broadcast's
    /// bundle ID.
    public var topic: String {
        switch self {
        case .notification(let notification): notification.topic
        case .broadcast(let broadcast): broadcast.bundleID
        }
    }

    /// `apns-expiration`, when the request has one (a broadcast always has).
    public var expiration: APNsExpiration? {
        switch self {
        case .notification(let notification): notification.expiration
        case .broadcast(let broadcast): APNsExpiration(secondsSince1970: broadcast.expiration)
        }
    }

    public var pushType: APNsPushType {
        switch self {
        case .notification(let notification): notification.pushType
        case .broadcast: .liveactivity
        }
    }

    /// Who receives it, as a key to hold back requests by (APNs' 429 TooManyRequests is per device
    /// token, or per channel): the token's hex, or `channel:` and the channel id. Not for logs: a
    /// whole device token is a secret (use `description`).
    public var recipientKey: String {
        switch self {
        case .notification(let notification): notification.deviceToken.hex
        case .broadcast(let broadcast): "channel:" + broadcast.channelID
        }
    }

    /// The payload's size in bytes.
    public var payloadBytes: Int {
        switch self {
        case .notification(let notification): notification.payload.count
        case .broadcast(let broadcast): broadcast.payload.count
        }
    }

    /// Apple's rules that can be checked without APNs (`APNsNotification.validate(for:checkingPayloadSyntax:)`,
    /// `APNsBroadcast.validate()`).
    public func validate(
        for kind: APNsAuthenticationKind? = nil, checkingPayloadSyntax: Bool = true
    ) throws(APNsNotificationError) {
        switch self {
        case .notification(let notification):
            try notification.validate(for: kind, checkingPayloadSyntax: checkingPayloadSyntax)
        case .broadcast(let broadcast): try broadcast.validate()
        }
    }
}

extension APNsPush: CustomStringConvertible {
    /// For logs: `device 00fc13ad…e8f0` (the token redacted as `APNsDeviceToken` prints it) or
    /// `channel <id>` (a channel id is not a secret: anyone may subscribe to it).
    public var description: String {
        switch self {
        case .notification(let notification): "device \(notification.deviceToken)"
        case .broadcast(let broadcast): "channel \(broadcast.channelID)"
        }
    }
}
