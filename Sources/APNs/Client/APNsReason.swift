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

    /// What Apple's provider API documentation says the reason means, in a sentence (for results,
    /// logs and `send`); `nil` for a reason Apple has not documented.
    public var meaning: String? {
        switch self {
        case .badCollapseID: "the collapse identifier exceeds the maximum allowed size"
        case .badDeviceToken:
            "the device token is bad: check that it is a valid token and that it matches the environment (production or development)"
        case .badExpirationDate: "the apns-expiration value is bad"
        case .badMessageID: "the apns-id value is bad"
        case .badPriority: "the apns-priority value is bad"
        case .badTopic: "the apns-topic is invalid"
        case .deviceTokenNotForTopic: "the device token does not match the topic (another app's token)"
        case .duplicateHeaders: "one or more headers were repeated"
        case .idleTimeout: "the connection was idle too long"
        case .invalidPushType: "the apns-push-type is not one APNs knows"
        case .missingDeviceToken: "the request path has no device token"
        case .missingTopic: "the apns-topic is required (the certificate covers several topics)"
        case .payloadEmpty: "the payload is empty"
        case .topicDisallowed: "pushing to this topic is not allowed"
        case .featureNotEnabled: "the app does not have the broadcast capability enabled"
        case .missingChannelID: "the request has no channel id"
        case .badChannelID: "the channel id is not valid"
        case .channelNotRegistered:
            "the channel does not exist for this bundle id (it was deleted, or is another app's)"
        case .badRequestParams: "a request parameter is not valid"
        case .badRequestPayload: "the request body is not valid"
        case .missingPushType: "the request has no apns-push-type"
        case .cannotCreateChannelConfig: "the app has reached its limit of channels"
        case .topicMismatch: "the credential does not cover this bundle id"
        case .badCertificate: "the certificate is bad (revoked, expired or not Apple's)"
        case .badCertificateEnvironment: "the client certificate is for the other environment"
        case .expiredProviderToken: "the provider token is stale: a new one must be signed"
        case .forbidden: "the action is not allowed"
        case .invalidProviderToken:
            "the provider token is not valid or its signature could not be verified (team id, key id or key wrong, or the key revoked)"
        case .missingProviderToken: "no provider certificate or provider token was given"
        case .unrelatedKeyIDInToken:
            "the token's key id is not related to the key of the first token on this connection"
        case .badEnvironmentKeyIDInToken: "the token's key is for the other environment"
        case .badPath: "the request path is bad"
        case .methodNotAllowed: "the method was not POST"
        case .expiredToken: "the device token has expired"
        case .unregistered: "the device token is no longer active for the topic"
        case .payloadTooLarge: "the payload is too large"
        case .tooManyProviderTokenUpdates: "the provider token is updated too often"
        case .tooManyRequests: "too many requests were made in a row to the same device token"
        case .internalServerError: "an internal server error occurred at APNs"
        case .serviceUnavailable: "APNs is unavailable"
        case .shutdown: "the APNs server is shutting down"
        case .unknown: nil
        }
    }
}
