/// The `reason` string of an APNs error answer (response body or GOAWAY payload), as Apple
/// documents them; anything else is kept as `unknown` so a new reason is never lost.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    // 400
    case badCollapseID, badDeviceToken, badExpirationDate, badMessageID, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    // 400, broadcasts and channel management
    case featureNotEnabled, missingChannelID, badChannelID, channelNotRegistered, badRequestParams
    case badRequestPayload, missingPushType, cannotCreateChannelConfig
    // 403
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIDInToken, badEnvironmentKeyIDInToken
    /// Broadcasts and channel management: the credential does not cover the path's bundle ID.
    case topicMismatch
    // 404, 405
    case badPath, methodNotAllowed
    // 410
    case expiredToken, unregistered
    // 413
    case payloadTooLarge
    // 429
    case tooManyProviderTokenUpdates, tooManyRequests
    // 500, 503
    case internalServerError, serviceUnavailable, shutdown
    case unknown(String)

    private static let known: [String: APNsReason] = [
        "BadCollapseId": .badCollapseID, "BadDeviceToken": .badDeviceToken, "BadExpirationDate": .badExpirationDate,
        "BadMessageId": .badMessageID, "BadPriority": .badPriority, "BadTopic": .badTopic,
        "DeviceTokenNotForTopic": .deviceTokenNotForTopic, "DuplicateHeaders": .duplicateHeaders,
        "IdleTimeout": .idleTimeout, "InvalidPushType": .invalidPushType, "MissingDeviceToken": .missingDeviceToken,
        "MissingTopic": .missingTopic, "PayloadEmpty": .payloadEmpty, "TopicDisallowed": .topicDisallowed,
        "FeatureNotEnabled": .featureNotEnabled, "MissingChannelId": .missingChannelID, "BadChannelId": .badChannelID,
        "ChannelNotRegistered": .channelNotRegistered, "BadRequestParams": .badRequestParams,
        "BadRequestPayload": .badRequestPayload, "MissingPushType": .missingPushType,
        "CannotCreateChannelConfig": .cannotCreateChannelConfig, "TopicMismatch": .topicMismatch,
        "BadCertificate": .badCertificate, "BadCertificateEnvironment": .badCertificateEnvironment,
        "ExpiredProviderToken": .expiredProviderToken, "Forbidden": .forbidden,
        "InvalidProviderToken": .invalidProviderToken, "MissingProviderToken": .missingProviderToken,
        "UnrelatedKeyIdInToken": .unrelatedKeyIDInToken, "BadEnvironmentKeyIdInToken": .badEnvironmentKeyIDInToken,
        "BadPath": .badPath, "MethodNotAllowed": .methodNotAllowed, "ExpiredToken": .expiredToken,
        "Unregistered": .unregistered, "PayloadTooLarge": .payloadTooLarge,
        "TooManyProviderTokenUpdates": .tooManyProviderTokenUpdates, "TooManyRequests": .tooManyRequests,
        "InternalServerError": .internalServerError, "ServiceUnavailable": .serviceUnavailable, "Shutdown": .shutdown,
    ]
    private static let names: [APNsReason: String] = Dictionary(uniqueKeysWithValues: known.map { ($1, $0) })

    public init(_ string: String) {
        self = Self.known[string] ?? .unknown(string)
    }

    /// The string as APNs sends it.
    public var rawValue: String {
        if case .unknown(let string) = self { return string }
        return Self.names[self]!
    }

    public var description: String { rawValue }
}
