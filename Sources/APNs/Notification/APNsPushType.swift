/// The `apns-push-type` header: what the payload contains. APNs checks that the topic carries the
/// suffix that goes with the type (`com.example.app.voip` for `.voip`, …).
public enum APNsPushType: String, Sendable, Hashable, CaseIterable, Codable {
    case alert
    case background
    case voip
    case complication
    case fileprovider
    case mdm
    case liveactivity
    case location
    case pushtotalk
    case widgets
    case controls
    /// Notifications forwarded to an accessory (AccessoryNotifications, iOS 26.5+).
    case accessory

    /// The suffix the `apns-topic` must end with, appended to the app's bundle ID.
    ///
    /// `nil` for `alert` and `background` (the bare bundle ID) and for `mdm`, whose topic is the UID
    /// attribute of the MDM push certificate's subject and has no fixed shape.
    public var topicSuffix: String? {
        switch self {
        case .alert, .background, .mdm: nil
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .liveactivity: ".push-type.liveactivity"
        case .location: ".location-query"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        case .accessory: ".push-type.accessory"
        }
    }

    /// The largest payload APNs accepts for this type, in bytes: 5120 for VoIP, 4096 for the rest.
    public var maximumPayloadBytes: Int {
        self == .voip ? 5120 : 4096
    }

    /// Apple: "The location push type supports only token-based authentication."
    public var requiresTokenAuthentication: Bool {
        self == .location
    }

    /// Whether priority 10 is an error for this type (Apple: background "Always use priority 5.
    /// Using priority 10 is an error").
    public var forbidsImmediatePriority: Bool {
        self == .background
    }

    /// Whether priority 1 is an error for this type (ActivityKit: Live Activity pushes use 5 or 10).
    public var forbidsLowestPriority: Bool {
        self == .liveactivity
    }
}
