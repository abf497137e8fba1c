import Foundation

/// The `apns-id` header: a canonical UUID in lowercase (8-4-4-4-12 hex digits).
///
/// APNs echoes it in every response and uses it when it reports an error, so a stable ID per event
/// makes a notification traceable from the producer's event to Apple's answer.
public struct APNsNotificationID: Sendable, Hashable, CustomStringConvertible {
    /// The canonical lowercase form sent on the wire.
    public let uuidString: String

    /// Parses a canonical UUID in either case and keeps its lowercase form; rejects anything else
    /// (braces, missing hyphens, wrong group lengths), as APNs would with `BadMessageId`.
    public init(_ string: some StringProtocol) throws(APNsNotificationError) {
        try self.init(String(string))
    }

    /// The hot path (every consumed event): a concrete `String`, so no generic dispatch per byte.
    public init(_ string: String) throws(APNsNotificationError) {
        guard let canonical = Self.canonicalize(string) else {
            throw APNsNotificationError(
                .badMessageID, field: .apnsID,
                "apns-id must be a canonical UUID (8-4-4-4-12 hex digits), got \(string.utf8.count) bytes")
        }
        self.uuidString = canonical
    }

    /// A new random (version 4) ID.
    public static func random() -> APNsNotificationID {
        APNsNotificationID(unchecked: UUID().uuidString.lowercased())
    }

    /// The event's own ID when it is a UUID (so the apns-id is stable across retries and replays),
    /// otherwise `nil`: the caller then picks one (see `random()`).
    public static func derived(fromEventID eventID: String) -> APNsNotificationID? {
        canonicalize(eventID).map(APNsNotificationID.init(unchecked:))
    }

    private init(unchecked: String) {
        self.uuidString = unchecked
    }

    public var description: String { uuidString }

    private static func canonicalize(_ string: String) -> String? {
        var id = string
        // One pass over the bytes (contiguous, no per-byte iterator): the form, and whether any
        // hex digit is uppercase.
        let hasUppercase = id.withUTF8 { bytes -> Bool? in
            guard bytes.count == 36 else { return nil }
            var uppercase = false
            for offset in bytes.indices {
                let byte = bytes[offset]
                if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                    guard byte == UInt8(ascii: "-") else { return nil }
                } else if byte &- UInt8(ascii: "A") < 6 {
                    uppercase = true
                } else if !(byte &- UInt8(ascii: "0") < 10 || byte &- UInt8(ascii: "a") < 6) {
                    return nil
                }
            }
            return uppercase
        }
        guard let hasUppercase else { return nil }
        // Already lowercase, as event IDs made by UUID libraries are: kept as it is, without a new
        // string for every event.
        return hasUppercase ? id.lowercased() : id
    }
}

/// An `apns-collapse-id` made from an event's id, for a sender that wants a notification pushed again
/// (after a crash, say) to replace the first on the device instead of showing twice: the same id
/// always gives the same collapse id, and different ids practically never share one. SHA-256 of the
/// id's UTF-8, base64url without padding: 43 bytes, within APNs' 64.
public enum APNsDerivedCollapseID {
    public static func fromEventID(_ eventID: String) -> String {
        var text = ""
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let digest = OpenSSLDigest.sha256(eventID.utf8)
        var index = 0
        while index < digest.count {
            let chunk = digest[index..<min(index + 3, digest.count)]
            var value: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * offset) }
            for position in 0..<(chunk.count + 1) {
                text.append(alphabet[Int((value >> (18 - 6 * position)) & 0x3F)])
            }
            index += 3
        }
        return text
    }
}
