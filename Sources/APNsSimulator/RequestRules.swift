import NIOHPACK

/// The request headers APNs reads, picked out of the header block in one pass.
package struct RequestHead {
    var method: String?
    package var path: String?
    package var authorization: String?
    var apnsID: String?
    var expiration: String?
    var priority: String?
    var topic: String?
    var pushType: String?
    var collapseID: String?
    /// Broadcast and channel management: `apns-request-id` and `apns-channel-id`.
    var requestID: String?
    var channelID: String?
    /// Some header name appeared more than once (DuplicateHeaders).
    var hasDuplicates = false

    package init(_ headers: HPACKHeaders) {
        // Names APNs reads (and the usual others) are told apart by a bit each, so a repeat among them
        // costs nothing; only names outside the table are compared with one another.
        var seen: UInt32 = 0
        var others: [String] = []
        for (name, value, _) in headers {
            let bit = Self.knownBit(name)
            if bit != 0 {
                if seen & bit != 0 { hasDuplicates = true }
                seen |= bit
            } else {
                if others.contains(name) { hasDuplicates = true }
                others.append(name)
                continue
            }
            switch bit {
            case Self.methodBit: method = value
            case Self.pathBit: path = value
            case Self.authorizationBit: authorization = value
            case Self.apnsIDBit: apnsID = value
            case Self.expirationBit: expiration = value
            case Self.priorityBit: priority = value
            case Self.topicBit: topic = value
            case Self.pushTypeBit: pushType = value
            case Self.collapseIDBit: collapseID = value
            case Self.requestIDBit: requestID = value
            case Self.channelIDBit: channelID = value
            default: break
            }
        }
    }

    private static let methodBit: UInt32 = 1 << 0
    private static let pathBit: UInt32 = 1 << 1
    private static let authorizationBit: UInt32 = 1 << 2
    private static let apnsIDBit: UInt32 = 1 << 3
    private static let expirationBit: UInt32 = 1 << 4
    private static let priorityBit: UInt32 = 1 << 5
    private static let topicBit: UInt32 = 1 << 6
    private static let pushTypeBit: UInt32 = 1 << 7
    private static let collapseIDBit: UInt32 = 1 << 8
    private static let schemeBit: UInt32 = 1 << 9
    private static let authorityBit: UInt32 = 1 << 10
    private static let contentLengthBit: UInt32 = 1 << 11
    private static let contentTypeBit: UInt32 = 1 << 12
    private static let userAgentBit: UInt32 = 1 << 13
    private static let requestIDBit: UInt32 = 1 << 14
    private static let channelIDBit: UInt32 = 1 << 15

    /// The bit of a name in the table, 0 for any other. Length and first byte pick the one candidate;
    /// the exact comparison (names are compared as received, case included) decides.
    private static func knownBit(_ name: String) -> UInt32 {
        let candidate: (String, UInt32)
        switch (name.utf8.count, name.utf8.first ?? 0) {
        case (5, UInt8(ascii: ":")): candidate = (":path", pathBit)
        case (7, UInt8(ascii: ":")):
            candidate = name == ":method" ? (":method", methodBit) : (":scheme", schemeBit)
        case (10, UInt8(ascii: ":")): candidate = (":authority", authorityBit)
        case (13, UInt8(ascii: "a")):
            candidate = name == "authorization" ? ("authorization", authorizationBit) : ("apns-priority", priorityBit)
        case (7, UInt8(ascii: "a")): candidate = ("apns-id", apnsIDBit)
        case (15, UInt8(ascii: "a")):
            // apns-expiration, apns-request-id and apns-channel-id differ in their sixth byte.
            switch name.utf8.dropFirst(5).first {
            case UInt8(ascii: "r"): candidate = ("apns-request-id", requestIDBit)
            case UInt8(ascii: "c"): candidate = ("apns-channel-id", channelIDBit)
            default: candidate = ("apns-expiration", expirationBit)
            }
        case (10, UInt8(ascii: "a")): candidate = ("apns-topic", topicBit)
        case (14, UInt8(ascii: "a")): candidate = ("apns-push-type", pushTypeBit)
        case (16, UInt8(ascii: "a")): candidate = ("apns-collapse-id", collapseIDBit)
        case (14, UInt8(ascii: "c")): candidate = ("content-length", contentLengthBit)
        case (12, UInt8(ascii: "c")): candidate = ("content-type", contentTypeBit)
        case (10, UInt8(ascii: "u")): candidate = ("user-agent", userAgentBit)
        default: return 0
        }
        return name == candidate.0 ? candidate.1 : 0
    }
}

/// A request that passed every header rule.
package struct CheckedRequest {
    package var deviceToken: String
    package var topic: String
    package var pushType: PushType?
    package var apnsID: String?
    package var maximumPayloadSize: Int
}

/// Apple's request rules ("Communicating with APNs" Tables 8-1, 8-2, 8-6; "Sending notification
/// requests to APNs", push types). Pure functions: each returns the reason APNs would answer.
package enum RequestRules {
    static let pathPrefix = "/3/device/"
    static let maximumCollapseIDBytes = 64

    /// Duplicates, method and path; gives the device token (lowercase hex).
    package static func checkLine(_ head: RequestHead) -> Result<String, SimulatorReason> {
        if head.hasDuplicates { return .failure(.duplicateHeaders) }
        guard head.method == "POST" else { return .failure(.methodNotAllowed) }
        guard let path = head.path else { return .failure(.badPath) }
        if path == "/3/device" || path == pathPrefix { return .failure(.missingDeviceToken) }
        if let verdict = path.utf8.withContiguousStorageIfAvailable({ checkASCIIPath($0) }), let verdict {
            return verdict
        }
        guard path.hasPrefix(pathPrefix) else { return .failure(.badPath) }
        let token = path.utf8.dropFirst(pathPrefix.utf8.count)
        if token.contains(UInt8(ascii: "/")) { return .failure(.badPath) }
        guard token.count % 2 == 0, token.allSatisfy({ $0.isHexDigit }) else { return .failure(.badDeviceToken) }
        return .success(String(decoding: token, as: UTF8.self).lowercased())
    }

    /// The path rules on raw bytes for an all-ASCII path (where bytes and characters agree), making the
    /// token string once and lowercasing only when needed; `nil` for any other path (the caller then takes
    /// the character-based way). `/3/device` and `/3/device/` were answered before.
    private static func checkASCIIPath(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<String, SimulatorReason>? {
        let prefix: StaticString = "/3/device/"
        let prefixCount = prefix.utf8CodeUnitCount
        var hasUppercase = false
        var isHex = true
        for (i, c) in bytes.enumerated() {
            if c >= 0x80 { return nil }
            if i < prefixCount {
                if c != prefix.utf8Start[i] { isHex = false }
            } else if c == UInt8(ascii: "/") {
                isHex = false
            } else if !c.isLowerHexDigit {
                if c >= 0x41 && c <= 0x46 { hasUppercase = true } else { isHex = false }
            }
        }
        // Anything that is not exactly prefix + hex is sorted out by the general way, in its order.
        guard isHex, bytes.count >= prefixCount, (bytes.count - prefixCount) % 2 == 0 else { return nil }
        let token = String(decoding: UnsafeBufferPointer(rebasing: bytes[prefixCount...]), as: UTF8.self)
        return .success(hasUppercase ? token.lowercased() : token)
    }

    /// Every header rule after authentication.
    package static func checkHeaders(
        _ head: RequestHead,
        deviceToken: String,
        authorization: RequestAuthorization,
        acceptUppercaseMessageID: Bool
    ) -> Result<CheckedRequest, SimulatorReason> {
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
    package static func checkPayload(_ bytes: UnsafeRawBufferPointer, size: Int, limit: Int) -> SimulatorReason? {
        if size == 0 { return .payloadEmpty }
        if size > limit { return .payloadTooLarge }
        return JSONSyntax.isObject(bytes) ? nil : .badPayload
    }

    private static func resolveTopic(_ topic: String?, authorization: RequestAuthorization) -> Result<
        String, SimulatorReason
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
        // Every allowed character is ASCII, so bytes and characters agree: a leading or trailing "."
        // byte is the same verdict as `hasPrefix(".")`/`hasSuffix(".")`, and any other byte fails anyway.
        let utf8 = topic.utf8
        guard !utf8.isEmpty, utf8.count <= 255, utf8.first != 0x2E, utf8.last != 0x2E else { return false }
        let allowed: (UInt8) -> Bool = { c in
            c.isDigit || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x2D || c == 0x5F
        }
        return utf8.withContiguousStorageIfAvailable { $0.allSatisfy(allowed) } ?? utf8.allSatisfy(allowed)
    }

    /// voip needs `.voip`, complication `.complication`, and so on; alert and background need the bare
    /// bundle ID. A mismatch is a topic the push type cannot use: BadTopic.
    private static func checkPushTypeAgainstTopic(_ pushType: PushType?, topic: String) -> SimulatorReason? {
        guard let pushType, pushType != .mdm else { return nil }
        if let suffix = pushType.topicSuffix {
            // The topic passed the syntax check: ASCII only, so bytes count as characters.
            let utf8 = topic.utf8
            return utf8.count > suffix.utf8.count && utf8.reversed().starts(with: suffix.utf8.reversed())
                ? nil : .badTopic
        }
        return PushType.implied(byTopic: topic) == nil ? nil : .badTopic
    }

    private static func checkTopicAllowed(
        _ topic: String,
        pushType: PushType?,
        authorization: RequestAuthorization
    ) -> SimulatorReason? {
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
