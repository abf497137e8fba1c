/// A notification that breaks one of Apple's rules and must not be sent.
///
/// `code` says which rule; `field` says which part of the notification broke it (the worker maps it
/// to the event's JSON pointer); `apnsReason` is the reason string APNs itself would answer with,
/// where there is one, so a rejection found locally reads the same as one found by Apple.
public struct APNsNotificationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule was broken.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let badDeviceToken = Code(rawValue: "badDeviceToken")
        public static let missingTopic = Code(rawValue: "missingTopic")
        public static let badTopic = Code(rawValue: "badTopic")
        public static let topicSuffixMismatch = Code(rawValue: "topicSuffixMismatch")
        public static let badPriority = Code(rawValue: "badPriority")
        public static let badExpirationDate = Code(rawValue: "badExpirationDate")
        public static let badCollapseID = Code(rawValue: "badCollapseId")
        public static let badMessageID = Code(rawValue: "badMessageId")
        public static let payloadEmpty = Code(rawValue: "payloadEmpty")
        public static let payloadNotJSONObject = Code(rawValue: "payloadNotJSONObject")
        public static let payloadCompressed = Code(rawValue: "payloadCompressed")
        public static let payloadTooLarge = Code(rawValue: "payloadTooLarge")
        public static let tokenAuthenticationRequired = Code(rawValue: "tokenAuthenticationRequired")
        /// A broadcast's channel id is empty or not base64.
        public static let badChannelID = Code(rawValue: "badChannelId")
    }

    /// The part of the notification a rule is about.
    public enum Field: String, Hashable, Sendable, CaseIterable {
        case deviceToken, topic, pushType, priority, expiration, collapseID, apnsID, payload, channelID
    }

    public let code: Code
    public let field: Field
    /// A sentence for people, without the device token or the payload's content.
    public let message: String

    public init(_ code: Code, field: Field, _ message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    /// The reason string APNs answers with for the same fault, if it has one.
    public var apnsReason: String? {
        switch code {
        case .badDeviceToken: "BadDeviceToken"
        case .missingTopic: "MissingTopic"
        case .badTopic, .topicSuffixMismatch: "BadTopic"
        case .badPriority: "BadPriority"
        case .badExpirationDate: "BadExpirationDate"
        case .badCollapseID: "BadCollapseId"
        case .badMessageID: "BadMessageId"
        case .payloadEmpty: "PayloadEmpty"
        case .payloadTooLarge: "PayloadTooLarge"
        case .badChannelID: "BadChannelId"
        default: nil
        }
    }

    public var description: String { "\(field.rawValue): \(message)" }
}
