/// A device token: the hexadecimal form of the bytes the app received when it registered.
///
/// Apple asks providers not to assume a size, so any non-empty, even-length hex string is accepted.
/// The token is kept in lowercase so that equal tokens compare equal whatever case they came in.
/// `description` is redacted: a whole token never reaches a log line by accident.
public struct APNsDeviceToken: Sendable, Hashable, CustomStringConvertible {
    /// The lowercase hex string, as it goes into `:path`.
    public let hex: String

    /// Parses a hex string; rejects empty, odd-length and non-hex input.
    public init(_ string: some StringProtocol) throws(APNsNotificationError) {
        try self.init(String(string))
    }

    /// The hot path (every consumed event): a concrete `String`, so no generic dispatch per byte.
    public init(_ string: String) throws(APNsNotificationError) {
        // Already lowercase hex of even length, as apps receive their tokens: kept as it is, without
        // a copy (a per-byte iterator and a new string cost about 1% of the worker's CPU per event).
        let lowercaseHex = string.utf8.withContiguousStorageIfAvailable { bytes in
            !bytes.isEmpty && bytes.count % 2 == 0
                && bytes.allSatisfy { $0 &- UInt8(ascii: "0") < 10 || $0 &- UInt8(ascii: "a") < 6 }
        }
        if lowercaseHex == true {
            self.hex = string
            return
        }
        let utf8 = string.utf8
        guard !utf8.isEmpty else {
            throw APNsNotificationError(.badDeviceToken, field: .deviceToken, "device token is empty")
        }
        var lowered = [UInt8]()
        lowered.reserveCapacity(utf8.count)
        for (index, byte) in utf8.enumerated() {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"):
                lowered.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "F"):
                lowered.append(byte + 32)
            default:
                throw APNsNotificationError(
                    .badDeviceToken, field: .deviceToken,
                    "device token has a non-hex character at offset \(index)")
            }
        }
        guard lowered.count % 2 == 0 else {
            throw APNsNotificationError(
                .badDeviceToken, field: .deviceToken,
                "device token has an odd number of hex digits (\(lowered.count))")
        }
        self.hex = String(decoding: lowered, as: UTF8.self)
    }

    /// The request path for this token: `/3/device/<token>`.
    public var path: String { "/3/device/" + hex }

    /// The first 8 and last 4 hex digits, enough to correlate log lines without exposing the token.
    public var redacted: String {
        guard hex.count > 16 else { return String(hex.prefix(4)) + "…" }
        return String(hex.prefix(8)) + "…" + String(hex.suffix(4))
    }

    public var description: String { redacted }
}
