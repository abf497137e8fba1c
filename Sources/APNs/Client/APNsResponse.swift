import Foundation

/// APNs' answer to one notification request.
public struct APNsResponse: Sendable, Hashable {
    /// The HTTP status (200 on success).
    public var status: Int
    /// `apns-id`: ours, echoed, or the one APNs made up when we sent none.
    public var apnsID: String?
    /// `apns-unique-id`: APNs' own id, in the development environment only.
    public var apnsUniqueID: String?
    /// The `reason` of an error answer.
    public var reason: APNsReason?
    /// With 410: when APNs last confirmed the token was no longer valid (milliseconds since 1970).
    public var timestampMilliseconds: Int64?
    /// From the request's HEADERS being written to the end of the answer.
    public var latency: Duration
    /// `apns-request-id`: a broadcast's or channel-management call's id, ours echoed or APNs' own.
    public var requestID: String?
    /// `apns-channel-id`: the channel a create made.
    public var channelID: String?
    /// The answer's body, for broadcast and channel-management calls (a channel's settings, the
    /// list of channels); empty for device notifications, whose error body becomes `reason`.
    public var body: [UInt8]

    public init(
        status: Int, apnsID: String? = nil, apnsUniqueID: String? = nil, reason: APNsReason? = nil,
        timestampMilliseconds: Int64? = nil, requestID: String? = nil, channelID: String? = nil, body: [UInt8] = [],
        latency: Duration = .zero
    ) {
        self.status = status
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
        self.requestID = requestID
        self.channelID = channelID
        self.body = body
        self.latency = latency
    }

    /// Reads `{"reason": "...", "timestamp": 123}` from an error body. A body that is not JSON (a
    /// proxy's HTML page, a 404 from a plain HTTP/2 server) gives no reason rather than an error.
    package static func parseBody(_ body: [UInt8]) -> (reason: APNsReason?, timestamp: Int64?) {
        guard !body.isEmpty, let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            return (nil, nil)
        }
        let reason = (object["reason"] as? String).map(APNsReason.init)
        let timestamp = (object["timestamp"] as? NSNumber)?.int64Value
        return (reason, timestamp)
    }

    /// A `:status` value's digits, without making a `String` of them; nil if not all digits.
    package static func status(digits bytes: UnsafeRawBufferPointer) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 9 else { return nil }
        var value = 0
        for byte in bytes {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }
}
