/// One notification request, as Apple's provider API defines it: everything that goes into the
/// request headers and body. Build it, call `validate(for:)`, then hand it to the client.
public struct APNsNotification: Sendable, Hashable {
    public var deviceToken: APNsDeviceToken
    /// `apns-topic`: the app's bundle ID, plus the push type's suffix (see `APNsPushType.topicSuffix`).
    public var topic: String
    public var pushType: APNsPushType
    /// `apns-priority`; `nil` sends no header (APNs then assumes 10), except for background
    /// notifications, which get 5 (see `headerPriority`).
    public var priority: APNsPriority?
    public var expiration: APNsExpiration?
    /// `apns-collapse-id`, at most 64 bytes of UTF-8.
    public var collapseID: String?
    /// `apns-id`; `nil` lets APNs pick one and return it.
    public var apnsID: APNsNotificationID?
    /// The JSON payload, bytes as they go on the wire (not compressed).
    public var payload: [UInt8]

    public init(
        deviceToken: APNsDeviceToken,
        topic: String,
        pushType: APNsPushType,
        priority: APNsPriority? = nil,
        expiration: APNsExpiration? = nil,
        collapseID: String? = nil,
        apnsID: APNsNotificationID? = nil,
        payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
    }

    /// The priority to put in `apns-priority`. A background notification without one is sent with 5:
    /// APNs would read a missing header as 10, which is an error for background pushes.
    public var headerPriority: APNsPriority? {
        if priority == nil, pushType.forbidsImmediatePriority { return .powerConsidered }
        return priority
    }
}

/// The `apns-expiration` header.
public enum APNsExpiration: Sendable, Hashable {
    /// `0`: APNs tries once and does not store the notification.
    case immediately
    /// APNs stores the notification and retries delivery until this UNIX time (seconds, UTC).
    case at(secondsSince1970: Int64)

    /// Reads the header's numeric form: 0 means `.immediately`.
    public init(secondsSince1970: Int64) {
        self = secondsSince1970 == 0 ? .immediately : .at(secondsSince1970: secondsSince1970)
    }

    /// The header value.
    public var secondsSince1970: Int64 {
        switch self {
        case .immediately: 0
        case .at(let seconds): seconds
        }
    }

    /// Whether a notification with this expiration is no longer worth sending at `now` (UNIX seconds).
    /// `.immediately` never expires: APNs is asked to try it once.
    public func hasPassed(now secondsSince1970: Int64) -> Bool {
        switch self {
        case .immediately: false
        case .at(let seconds): seconds <= secondsSince1970
        }
    }
}

/// How the connection that sends a notification authenticates: some rules depend on it.
public enum APNsAuthenticationKind: String, Sendable, Hashable {
    /// A JWT provider token signed with a `.p8` key.
    case token
    /// A TLS client certificate.
    case certificate
}
