/// `apns-push-type` values and the topic suffix each one requires ("Sending notification requests to
/// APNs", "Know when to use push types"; `accessory` from "Forwarding notifications to your accessory
/// using the internet transport type").
public enum PushType: String, Sendable, CaseIterable {
    case alert, background, voip, complication, fileprovider, mdm, liveactivity, location, pushtotalk, widgets
    case controls, accessory

    /// The suffix the `apns-topic` must end with; `nil` where the topic is the bare bundle ID (alert,
    /// background) or comes from the certificate (mdm).
    public var topicSuffix: String? {
        switch self {
        case .alert, .background, .mdm: return nil
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .location: return ".location-query"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        case .accessory: return ".push-type.accessory"
        }
    }

    /// Largest payload APNs takes for this type: 5120 bytes for VoIP, 4096 for everything else.
    public var maximumPayloadSize: Int { self == .voip ? 5120 : 4096 }

    /// Every suffix, longest first, so `.push-type.liveactivity` is not mistaken for a shorter one.
    static let suffixes: [(String, PushType)] = PushType.allCases
        .compactMap { type in type.topicSuffix.map { ($0, type) } }
        .sorted { $0.0.count > $1.0.count }

    /// The push type a topic's suffix implies (`.voip` → voip), or `nil` for a bare bundle ID.
    static func implied(byTopic topic: String) -> PushType? {
        switch asciiSuffix(of: topic) {
        case .some(.some(let match)): return match.type
        case .some(.none): return nil
        case .none: return suffixes.first { topic.hasSuffix($0.0) }?.1
        }
    }

    /// The bundle ID under a topic: the topic without its push-type suffix.
    static func bundleID(ofTopic topic: String) -> String {
        switch asciiSuffix(of: topic) {
        case .some(.some(let match)): return String(decoding: topic.utf8.dropLast(match.length), as: UTF8.self)
        case .some(.none): return topic
        case .none:
            guard let (suffix, _) = suffixes.first(where: { topic.hasSuffix($0.0) }) else { return topic }
            return String(topic.dropLast(suffix.count))
        }
    }

    /// Suffixes as bytes, longest first.
    private static let suffixBytes: [([UInt8], PushType)] = suffixes.map { (Array($0.0.utf8), $0.1) }

    /// The suffix of an all-ASCII topic, compared as bytes (for ASCII, bytes and characters agree, and
    /// `String.hasSuffix` costs far more); `nil` when the topic is not ASCII, `.some(nil)` for no suffix.
    private static func asciiSuffix(of topic: String) -> (length: Int, type: PushType)?? {
        topic.utf8.withContiguousStorageIfAvailable { bytes -> (length: Int, type: PushType)?? in
            if bytes.contains(where: { $0 >= 0x80 }) { return nil }
            for (suffix, type) in suffixBytes where bytes.count >= suffix.count {
                if bytes[(bytes.count - suffix.count)...].elementsEqual(suffix) {
                    return .some((suffix.count, type))
                }
            }
            return .some(nil)
        } ?? nil
    }
}

/// The APNs environment the simulator plays: production (`api.push.apple.com`) or development
/// (`api.sandbox.push.apple.com`). Device tokens and certificates belong to one of them.
public enum SimulatorEnvironment: String, Sendable {
    case production, development
}
