import Foundation

/// A Live Activity update or end sent to every device subscribed to a broadcast channel (iOS 18+):
/// `POST /4/broadcasts/apps/<bundle ID>` on the push host, with `apns-channel-id`,
/// `apns-push-type: liveactivity`, `apns-expiration` and `apns-priority` (both required), and
/// optionally `apns-request-id`. The payload is an ActivityKit `aps` dictionary, at most 5,120 bytes.
public struct APNsBroadcast: Sendable, Hashable {
    /// The app's bundle ID, without a push-type suffix (APNs answers TopicDisallowed otherwise).
    public var bundleID: String
    /// The channel's id as channel management returned it (base64).
    public var channelID: String
    public var priority: APNsPriority
    /// UNIX seconds until which APNs stores the message; `0` = once, not stored (the only value a
    /// channel without message storage accepts).
    public var expiration: Int64
    /// `apns-request-id`: a UUID, sent lowercase; `nil` lets APNs make one.
    public var requestID: UUID?
    public var payload: [UInt8]

    /// The largest broadcast payload, in bytes.
    public static let maximumPayloadBytes = 5120

    public init(
        bundleID: String, channelID: String, priority: APNsPriority, expiration: Int64, requestID: UUID? = nil,
        payload: [UInt8]
    ) {
        self.bundleID = bundleID
        self.channelID = channelID
        self.priority = priority
        self.expiration = expiration
        self.requestID = requestID
        self.payload = payload
    }

    /// Apple's rules that can be checked without APNs, as `APNsNotificationError`s.
    public func validate() throws(APNsNotificationError) {
        try Self.validateBundleID(bundleID)
        if let type = APNsPushType.allCases.first(where: { $0.topicSuffix.map(bundleID.hasSuffix) ?? false }) {
            throw APNsNotificationError(
                .badTopic, field: .topic,
                "a broadcast goes to the bare bundle id, not one ending in '\(type.topicSuffix!)' (APNs: TopicDisallowed)"
            )
        }
        if channelID.isEmpty || !channelID.utf8.allSatisfy(Self.isBase64) {
            throw APNsNotificationError(.badChannelID, field: .channelID, "the channel id must be base64 text")
        }
        if priority == .lowPower {
            throw APNsNotificationError(
                .badPriority, field: .priority, "Live Activity broadcasts use priority 10 or 5")
        }
        if expiration < 0 {
            throw APNsNotificationError(
                .badExpirationDate, field: .expiration, "expiration must be a UNIX time in seconds or 0")
        }
        if payload.isEmpty { throw APNsNotificationError(.payloadEmpty, field: .payload, "payload is empty") }
        if payload.count > Self.maximumPayloadBytes {
            throw APNsNotificationError(
                .payloadTooLarge, field: .payload,
                "payload is \(payload.count) bytes; the limit for a broadcast is \(Self.maximumPayloadBytes)")
        }
    }

    /// A bundle id as Apple makes them (letters, digits, `.` and `-`), which is safe to put in a
    /// request path (`/4/broadcasts/apps/<bundle ID>`, channel management's `/1/apps/<bundle ID>/…`):
    /// a `/`, `?` or `#` would send the request somewhere else.
    public static func validateBundleID(_ bundleID: String) throws(APNsNotificationError) {
        guard !bundleID.isEmpty else {
            throw APNsNotificationError(.badTopic, field: .topic, "the bundle id is empty")
        }
        if let (position, character) = bundleID.enumerated().first(where: { !isBundleIDCharacter($0.element) }) {
            let shown =
                character.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
                ? "'\(character)'" : "a character"
            throw APNsNotificationError(
                .badTopic, field: .topic,
                "the bundle id may hold only letters, digits, '.' and '-' (it is part of the request path): "
                    + "\(shown) at position \(position + 1)")
        }
    }

    private static func isBundleIDCharacter(_ character: Character) -> Bool {
        guard character.isASCII, let byte = character.asciiValue else { return false }
        return (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "-")
    }

    private static func isBase64(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "=") || byte == UInt8(ascii: "-")
            || byte == UInt8(ascii: "_")
    }

    var request: APNsCustomRequest {
        var headers: [(name: String, value: String)] = [
            ("apns-channel-id", channelID), ("apns-push-type", "liveactivity"),
            ("apns-expiration", String(expiration)), ("apns-priority", String(priority.rawValue)),
        ]
        if let requestID { headers.append(("apns-request-id", requestID.uuidString.lowercased())) }
        return APNsCustomRequest(
            method: "POST", path: "/4/broadcasts/apps/\(bundleID)", headers: headers, body: payload)
    }
}
