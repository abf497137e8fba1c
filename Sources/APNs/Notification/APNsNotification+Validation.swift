import Foundation

extension APNsNotification {
    /// The largest `apns-collapse-id` APNs accepts, in bytes.
    public static let maximumCollapseIDBytes = 64

    /// Checks every rule of Apple's provider API that can be checked before sending, so a notification
    /// APNs would reject with 400 or 413 never goes out. Throws the first rule broken.
    ///
    /// - Parameters:
    ///   - authentication: the kind of connection it will be sent on, when known (`location` pushes
    ///     need token authentication).
    ///   - checkingPayloadSyntax: parse the payload to prove it is a JSON object. Callers that built
    ///     the bytes from a parsed object (the worker) can skip it; the byte-level checks still run.
    public func validate(
        for authentication: APNsAuthenticationKind? = nil,
        checkingPayloadSyntax: Bool = true
    ) throws(APNsNotificationError) {
        try validateTopic()
        if let priority, priority == .immediate, pushType.forbidsImmediatePriority {
            throw APNsNotificationError(
                .badPriority, field: .priority,
                "priority 10 is not allowed for push type '\(pushType.rawValue)'; use 5 or 1")
        }
        if let priority, priority == .lowPower, pushType.forbidsLowestPriority {
            throw APNsNotificationError(
                .badPriority, field: .priority,
                "priority 1 is not allowed for push type '\(pushType.rawValue)'; use 10 or 5")
        }
        if authentication == .certificate, pushType.requiresTokenAuthentication {
            throw APNsNotificationError(
                .tokenAuthenticationRequired, field: .pushType,
                "push type '\(pushType.rawValue)' supports token-based authentication only")
        }
        if let expiration, expiration.secondsSince1970 < 0 {
            throw APNsNotificationError(
                .badExpirationDate, field: .expiration,
                "expiration must be a UNIX time in seconds or 0, got \(expiration.secondsSince1970)")
        }
        if let collapseID {
            // An HTTP/2 field value must not hold CR, LF or NUL (RFC 9113 §8.2.1); no control
            // character belongs in a collapse id.
            if let bad = collapseID.utf8.firstIndex(where: { $0 < 0x20 || $0 == 0x7F }) {
                let offset = collapseID.utf8.distance(from: collapseID.utf8.startIndex, to: bad)
                throw APNsNotificationError(
                    .badCollapseID, field: .collapseID,
                    "collapse id has a control character (CR, LF, NUL, …) at byte \(offset): not allowed in a header value"
                )
            }
            let size = collapseID.utf8.count
            if size == 0 || size > Self.maximumCollapseIDBytes {
                throw APNsNotificationError(
                    .badCollapseID, field: .collapseID,
                    "collapse id must be 1 to \(Self.maximumCollapseIDBytes) bytes, got \(size)")
            }
        }
        try validatePayload(checkingSyntax: checkingPayloadSyntax)
    }

    private func validateTopic() throws(APNsNotificationError) {
        guard !topic.isEmpty else {
            throw APNsNotificationError(.missingTopic, field: .topic, "topic is empty")
        }
        // A header value: visible ASCII only (bundle IDs are letters, digits, '-' and '.').
        if let bad = topic.utf8.firstIndex(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            let offset = topic.utf8.distance(from: topic.utf8.startIndex, to: bad)
            throw APNsNotificationError(
                .badTopic, field: .topic, "topic has a space, control or non-ASCII character at offset \(offset)")
        }
        // Byte comparisons: the topic is ASCII by now, so they mean what `hasSuffix` means, without
        // its Unicode machinery (which, over every push type, cost as much as the rest of the rules).
        func endsIn(_ suffix: String) -> Bool {
            let (bytes, tail) = (topic.utf8, suffix.utf8)
            return bytes.count >= tail.count && bytes.suffix(tail.count).elementsEqual(tail)
        }
        if let suffix = pushType.topicSuffix {
            guard endsIn(suffix), topic.utf8.count > suffix.utf8.count else {
                throw APNsNotificationError(
                    .topicSuffixMismatch, field: .topic,
                    "push type '\(pushType.rawValue)' needs a topic of the form <bundle id>\(suffix)")
            }
        } else if pushType != .mdm,
            let other = APNsPushType.allCases.first(where: { $0.topicSuffix.map(endsIn) ?? false })
        {
            // APNs answers 400 BadTopic: the topic names another push type's channel.
            throw APNsNotificationError(
                .topicSuffixMismatch, field: .topic,
                "push type '\(pushType.rawValue)' takes the bare bundle id, but the topic ends in "
                    + "'\(other.topicSuffix!)' (push type '\(other.rawValue)')")
        }
    }

    private func validatePayload(checkingSyntax: Bool) throws(APNsNotificationError) {
        let limit = pushType.maximumPayloadBytes
        guard !payload.isEmpty else {
            throw APNsNotificationError(.payloadEmpty, field: .payload, "payload is empty")
        }
        guard payload.count <= limit else {
            throw APNsNotificationError(
                .payloadTooLarge, field: .payload,
                "payload is \(payload.count) bytes; the limit for push type '\(pushType.rawValue)' is \(limit)")
        }
        // gzip (1f 8b) and zlib (78 01/5e/9c/da) streams: Apple forbids compressed payloads.
        if payload.count >= 2 {
            let (first, second) = (payload[0], payload[1])
            if (first == 0x1F && second == 0x8B) || (first == 0x78 && [0x01, 0x5E, 0x9C, 0xDA].contains(second)) {
                throw APNsNotificationError(
                    .payloadCompressed, field: .payload, "payload is compressed; APNs takes plain JSON only")
            }
        }
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        guard payload.first(where: { !isSpace($0) }) == UInt8(ascii: "{"),
            payload.last(where: { !isSpace($0) }) == UInt8(ascii: "}")
        else {
            throw APNsNotificationError(
                .payloadNotJSONObject, field: .payload, "payload must be a JSON object ({…})")
        }
        guard checkingSyntax else { return }
        let object = try? JSONSerialization.jsonObject(with: Data(payload))
        guard object is [String: Any] else {
            throw APNsNotificationError(
                .payloadNotJSONObject, field: .payload, "payload is not well-formed JSON")
        }
    }
}
