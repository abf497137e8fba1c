import NIOHPACK

/// The request headers APNs reads, picked out of the header block in one pass.
struct RequestHead {
    var method: String?
    var path: String?
    var authorization: String?
    var apnsID: String?
    var expiration: String?
    var priority: String?
    var topic: String?
    var pushType: String?
    var collapseID: String?
    /// Some header name appeared more than once (DuplicateHeaders).
    var hasDuplicates = false

    init(_ headers: HPACKHeaders) {
        // Headers are few: a quadratic scan over the names beats hashing them.
        var index = 0
        for (name, value, _) in headers {
            var other = 0
            for (earlier, _, _) in headers {
                if other == index { break }
                if earlier == name {
                    hasDuplicates = true
                    break
                }
                other += 1
            }
            index += 1
            switch name {
            case ":method": method = value
            case ":path": path = value
            case "authorization": authorization = value
            case "apns-id": apnsID = value
            case "apns-expiration": expiration = value
            case "apns-priority": priority = value
            case "apns-topic": topic = value
            case "apns-push-type": pushType = value
            case "apns-collapse-id": collapseID = value
            default: break
            }
        }
    }
}

/// A request that passed every header rule.
struct CheckedRequest {
    var deviceToken: String
    var topic: String
    var pushType: PushType?
    var apnsID: String?
    var maximumPayloadSize: Int
}

/// Apple's request rules ("Communicating with APNs" Tables 8-1, 8-2, 8-6; "Sending notification
/// requests to APNs", push types). Pure functions: each returns the reason APNs would answer.
enum RequestRules {
    static let pathPrefix = "/3/device/"
    static let maximumCollapseIDBytes = 64

    /// Duplicates, method and path; gives the device token (lowercase hex).
    static func checkLine(_ head: RequestHead) -> Result<String, APNsReason> {
        if head.hasDuplicates { return .failure(.duplicateHeaders) }
        guard head.method == "POST" else { return .failure(.methodNotAllowed) }
        guard let path = head.path else { return .failure(.badPath) }
        if path == "/3/device" || path == pathPrefix { return .failure(.missingDeviceToken) }
        guard path.hasPrefix(pathPrefix) else { return .failure(.badPath) }
        let token = path.utf8.dropFirst(pathPrefix.utf8.count)
        if token.contains(UInt8(ascii: "/")) { return .failure(.badPath) }
        guard token.count % 2 == 0, token.allSatisfy({ $0.isHexDigit }) else { return .failure(.badDeviceToken) }
        return .success(String(decoding: token, as: UTF8.self).lowercased())
    }

    /// Every header rule after authentication.
    static func checkHeaders(
        _ head: RequestHead,
        deviceToken: String,
        authorization: RequestAuthorization,
        acceptUppercaseMessageID: Bool
    ) -> Result<CheckedRequest, APNsReason> {
        if let id = head.apnsID, !isCanonicalUUID(id, allowUppercase: acceptUppercaseMessageID) {
            return .failure(.badMessageId)
        }
        if let expiration = head.expiration, !isEpochSeconds(expiration) { return .failure(.badExpirationDate) }
        if let priority = head.priority, priority != "10", priority != "5", priority != "1" {
            return .failure(.badPriority)
        }
        var pushType: PushType?
        if let raw = head.pushType {
            guard let known = PushType(rawValue: raw) else { return .failure(.invalidPushType) }
            pushType = known
        }
        if pushType == .background, head.priority == "10" { return .failure(.badPriority) }

        let topic: String
        switch resolveTopic(head.topic, authorization: authorization) {
        case .failure(let reason): return .failure(reason)
        case .success(let resolved): topic = resolved
        }
        guard isTopicSyntax(topic) else { return .failure(.badTopic) }
        if let reason = checkPushTypeAgainstTopic(pushType, topic: topic) { return .failure(reason) }
        if let reason = checkTopicAllowed(topic, pushType: pushType, authorization: authorization) {
            return .failure(reason)
        }
        if let collapse = head.collapseID, collapse.utf8.count > maximumCollapseIDBytes {
            return .failure(.badCollapseId)
        }
        let effectiveType = pushType ?? PushType.implied(byTopic: topic)
        return .success(
            CheckedRequest(
                deviceToken: deviceToken,
                topic: topic,
                pushType: pushType,
                apnsID: head.apnsID,
                maximumPayloadSize: effectiveType?.maximumPayloadSize ?? 4096
            )
        )
    }

    /// Empty, too large, or not a JSON object.
    static func checkPayload(_ bytes: UnsafeRawBufferPointer, size: Int, limit: Int) -> APNsReason? {
        if size == 0 { return .payloadEmpty }
        if size > limit { return .payloadTooLarge }
        return JSONSyntax.isObject(bytes) ? nil : .badPayload
    }

    private static func resolveTopic(_ topic: String?, authorization: RequestAuthorization) -> Result<
        String, APNsReason
    > {
        if let topic { return .success(topic) }
        switch authorization {
        case .certificate(let identity):
            // A single-topic certificate pushes to its own topic; several topics need the header.
            return identity.defaultTopic.map { .success($0) } ?? .failure(.missingTopic)
        case .token, .none:
            return .failure(.missingTopic)
        }
    }

    /// A bundle ID (plus suffix): letters, digits, `.`, `-`, `_`; not empty, not absurdly long.
    static func isTopicSyntax(_ topic: String) -> Bool {
        guard !topic.isEmpty, topic.utf8.count <= 255, !topic.hasPrefix("."), !topic.hasSuffix(".") else {
            return false
        }
        return topic.utf8.allSatisfy { c in
            c.isDigit || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x2D || c == 0x5F
        }
    }

    /// voip needs `.voip`, complication `.complication`, and so on; alert and background need the bare
    /// bundle ID. A mismatch is a topic the push type cannot use: BadTopic.
    private static func checkPushTypeAgainstTopic(_ pushType: PushType?, topic: String) -> APNsReason? {
        guard let pushType, pushType != .mdm else { return nil }
        if let suffix = pushType.topicSuffix {
            return topic.hasSuffix(suffix) && topic.count > suffix.count ? nil : .badTopic
        }
        return PushType.implied(byTopic: topic) == nil ? nil : .badTopic
    }

    private static func checkTopicAllowed(
        _ topic: String,
        pushType: PushType?,
        authorization: RequestAuthorization
    ) -> APNsReason? {
        switch authorization {
        case .none:
            return nil
        case .token(let token):
            guard let topics = token.topics else { return nil }
            return topics.contains(PushType.bundleID(ofTopic: topic)) ? nil : .topicDisallowed
        case .certificate(let identity):
            // "The location push type supports only token-based authentication."
            if pushType == .location { return .topicDisallowed }
            if identity.topics.contains(topic) || topic == identity.uid { return nil }
            return .topicDisallowed
        }
    }

    /// 8-4-4-4-12 hexadecimal digits; lowercase is the canonical form Apple asks for.
    static func isCanonicalUUID(_ text: String, allowUppercase: Bool) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return false }
        for (i, c) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !(allowUppercase ? c.isHexDigit : c.isLowerHexDigit) {
                return false
            }
        }
        return true
    }

    /// A UNIX epoch in seconds: digits only, fits in 64 bits.
    static func isEpochSeconds(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 18 && text.utf8.allSatisfy { $0.isDigit }
    }
}
