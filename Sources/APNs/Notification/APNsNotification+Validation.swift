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
        // One pass over the topic's bytes for every rule: going through `topic.utf8` per rule and
        // per push type retained and released the string each time (about 65 reference counts a
        // notification, measured).
        var topic = self.topic
        let pushType = self.pushType
        let suffixes = Self.topicSuffixes
        let verdict = topic.withUTF8 { bytes -> TopicVerdict in
            // A header value: visible ASCII only (bundle IDs are letters, digits, '-' and '.').
            if let bad = bytes.firstIndex(where: { $0 <= 0x20 || $0 >= 0x7F }) { return .badCharacter(at: bad) }
            // Byte comparisons: the topic is ASCII by now, so they mean what `hasSuffix` means,
            // without its Unicode machinery.
            return suffixes.bytes.withUnsafeBufferPointer { table in
                func endsIn(_ suffix: Range<Int>) -> Bool {
                    bytes.count >= suffix.count && bytes[(bytes.count - suffix.count)...].elementsEqual(table[suffix])
                }
                if let own = suffixes.entries.first(where: { $0.type == pushType }) {
                    return endsIn(own.range) && bytes.count > own.range.count ? .valid : .missingSuffix
                }
                if pushType != .mdm, let other = suffixes.entries.first(where: { endsIn($0.range) }) {
                    return .otherSuffix(other.type)
                }
                return .valid
            }
        }
        switch verdict {
        case .valid:
            return
        case .badCharacter(let offset):
            throw APNsNotificationError(
                .badTopic, field: .topic, "topic has a space, control or non-ASCII character at offset \(offset)")
        case .missingSuffix:
            throw APNsNotificationError(
                .topicSuffixMismatch, field: .topic,
                "push type '\(pushType.rawValue)' needs a topic of the form <bundle id>\(pushType.topicSuffix ?? "")")
        case .otherSuffix(let other):
            // APNs answers 400 BadTopic: the topic names another push type's channel.
            throw APNsNotificationError(
                .topicSuffixMismatch, field: .topic,
                "push type '\(pushType.rawValue)' takes the bare bundle id, but the topic ends in "
                    + "'\(other.topicSuffix!)' (push type '\(other.rawValue)')")
        }
    }

    /// What `validateTopic` found, carried out of the scope where the topic's bytes are read.
    private enum TopicVerdict {
        case valid
        case badCharacter(at: Int)
        case missingSuffix
        case otherSuffix(APNsPushType)
    }

    /// Every push type's topic suffix, as bytes in one array, found once: the rules compare a
    /// topic's tail with each, and ranges into one array cost no reference counting per suffix.
    private static let topicSuffixes: (bytes: [UInt8], entries: [(type: APNsPushType, range: Range<Int>)]) = {
        var bytes: [UInt8] = []
        var entries: [(type: APNsPushType, range: Range<Int>)] = []
        for type in APNsPushType.allCases {
            guard let suffix = type.topicSuffix else { continue }
            entries.append((type, bytes.count..<(bytes.count + suffix.utf8.count)))
            bytes += suffix.utf8
        }
        return (bytes, entries)
    }()

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
