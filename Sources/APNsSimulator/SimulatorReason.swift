/// A reason string from Apple's response tables (device pushes: "Handling notification responses from
/// APNs"; broadcasts and channel management: "Handling error responses from APNs"), with the HTTP status
/// APNs pairs it with. Unknown strings survive as-is so a scripted fault can carry any reason.
public struct SimulatorReason: Error, Hashable, Sendable, CustomStringConvertible {
    /// The exact string sent in the JSON `reason` key.
    public let rawValue: String
    /// The `:status` APNs answers with for this reason.
    public let status: Int

    public init(_ rawValue: String, status: Int) {
        self.rawValue = rawValue
        self.status = status
    }

    /// A known reason by its string (or one of ``spellings``); `nil` for a string not in Apple's tables.
    public init?(named name: String) {
        guard let known = Self.all.first(where: { $0.rawValue == name }) ?? Self.spellings[name] else { return nil }
        self = known
    }

    public var description: String { "\(status) \(rawValue)" }

    // 400
    public static let badCollapseId = SimulatorReason("BadCollapseId", status: 400)
    public static let badDeviceToken = SimulatorReason("BadDeviceToken", status: 400)
    public static let badExpirationDate = SimulatorReason("BadExpirationDate", status: 400)
    public static let badMessageId = SimulatorReason("BadMessageId", status: 400)
    public static let badPriority = SimulatorReason("BadPriority", status: 400)
    public static let badTopic = SimulatorReason("BadTopic", status: 400)
    public static let deviceTokenNotForTopic = SimulatorReason("DeviceTokenNotForTopic", status: 400)
    public static let duplicateHeaders = SimulatorReason("DuplicateHeaders", status: 400)
    public static let idleTimeout = SimulatorReason("IdleTimeout", status: 400)
    /// Apple's current response table lists it for an `apns-push-type` value it does not know. The
    /// simulator answers it for such values (docs/simulator.md).
    public static let invalidPushType = SimulatorReason("InvalidPushType", status: 400)
    public static let missingDeviceToken = SimulatorReason("MissingDeviceToken", status: 400)
    public static let missingTopic = SimulatorReason("MissingTopic", status: 400)
    public static let payloadEmpty = SimulatorReason("PayloadEmpty", status: 400)
    public static let topicDisallowed = SimulatorReason("TopicDisallowed", status: 400)
    /// Not an Apple reason: Apple's table has no string for a payload that is not a JSON object. The
    /// simulator answers this 400 so such a request never passes as delivered.
    public static let badPayload = SimulatorReason("BadPayload", status: 400)
    // 400, broadcast and channel management
    /// The app (bundle ID) does not have the broadcast capability.
    public static let featureNotEnabled = SimulatorReason("FeatureNotEnabled", status: 400)
    public static let missingChannelId = SimulatorReason("MissingChannelId", status: 400)
    /// `apns-channel-id` not base64, or longer than the simulator takes.
    public static let badChannelId = SimulatorReason("BadChannelId", status: 400)
    public static let channelNotRegistered = SimulatorReason("ChannelNotRegistered", status: 400)
    /// The channel-create body has an attribute APNs does not know, or a value it does not take.
    public static let badRequestParams = SimulatorReason("BadRequestParams", status: 400)
    /// The channel-create body is not a JSON object.
    public static let badRequestPayload = SimulatorReason("BadRequestPayload", status: 400)
    public static let missingPushType = SimulatorReason("MissingPushType", status: 400)
    /// The app reached its channel limit.
    public static let cannotCreateChannelConfig = SimulatorReason("CannotCreateChannelConfig", status: 400)
    // 403
    public static let badCertificate = SimulatorReason("BadCertificate", status: 403)
    public static let badCertificateEnvironment = SimulatorReason("BadCertificateEnvironment", status: 403)
    public static let expiredProviderToken = SimulatorReason("ExpiredProviderToken", status: 403)
    public static let forbidden = SimulatorReason("Forbidden", status: 403)
    public static let invalidProviderToken = SimulatorReason("InvalidProviderToken", status: 403)
    public static let missingProviderToken = SimulatorReason("MissingProviderToken", status: 403)
    /// A token signed by another key than the connection's first token, and the keys are not related.
    public static let unrelatedKeyIdInToken = SimulatorReason("UnrelatedKeyIdInToken", status: 403)
    /// A token signed by a key of the other environment.
    public static let badEnvironmentKeyIdInToken = SimulatorReason("BadEnvironmentKeyIdInToken", status: 403)
    /// Broadcast and channel management: the credential's bundle IDs do not include the path's.
    public static let topicMismatch = SimulatorReason("TopicMismatch", status: 403)
    // 404, 405, 410, 413
    public static let badPath = SimulatorReason("BadPath", status: 404)
    public static let methodNotAllowed = SimulatorReason("MethodNotAllowed", status: 405)
    public static let unregistered = SimulatorReason("Unregistered", status: 410)
    public static let payloadTooLarge = SimulatorReason("PayloadTooLarge", status: 413)
    // 429, 500, 503
    public static let tooManyProviderTokenUpdates = SimulatorReason("TooManyProviderTokenUpdates", status: 429)
    public static let tooManyRequests = SimulatorReason("TooManyRequests", status: 429)
    public static let internalServerError = SimulatorReason("InternalServerError", status: 500)
    public static let serviceUnavailable = SimulatorReason("ServiceUnavailable", status: 503)
    public static let shutdown = SimulatorReason("Shutdown", status: 503)

    /// Every reason of Apple's tables: the device-push table in its order, then the broadcast and
    /// channel-management reasons, then BadPayload (the simulator's own).
    public static let all: [SimulatorReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
        .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken,
        .badEnvironmentKeyIdInToken, .badPath, .methodNotAllowed, .unregistered, .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
        .featureNotEnabled, .missingChannelId, .badChannelId, .channelNotRegistered, .badRequestParams,
        .badRequestPayload, .missingPushType, .cannotCreateChannelConfig, .topicMismatch, .badPayload,
    ]

    /// Other spellings Apple prints, for fault injection only: the broadcast error table writes the 503
    /// reason `Service Unavailable`, with a space, where the device-push table writes
    /// `ServiceUnavailable`. A fault named so answers that exact string, so a client's handling of it can
    /// be tried; the simulator never answers it on its own.
    public static let spellings: [String: SimulatorReason] = [
        "Service Unavailable": SimulatorReason("Service Unavailable", status: 503)
    ]
}
