import Foundation

/// A broadcast that passed the header rules; its channel is looked up next.
package struct BroadcastRequest {
    package var bundleID: String
    package var channelID: String
    package var requestID: String?
    package var pushType: String
    package var expiration: Int64
    package var priority: Int
}

/// What a channel-management request asks for, by path and method.
package enum ManagementCall: Equatable {
    /// `POST /1/apps/<bundle>/channels`
    case create
    /// `GET /1/apps/<bundle>/channels`
    case read
    /// `DELETE /1/apps/<bundle>/channels`
    case delete
    /// `GET /1/apps/<bundle>/all-channels`
    case list
}

/// Apple's rules for broadcast pushes ("Sending broadcast push notification requests to APNs") and
/// channel management ("Sending channel management requests to APNs"), with the reasons of "Handling
/// error responses from APNs". Pure functions: each returns the reason the simulator answers. Which
/// reason wins when several apply is the simulator's order (Apple gives none); docs/simulator.md lists it.
package enum BroadcastRules {
    static let broadcastPrefix = "/4/broadcasts/apps/"
    static let managementPrefix = "/1/apps/"
    /// "The maximum size of the payload is 5 KB (5120 bytes)."
    package static let maximumPayloadSize = 5120
    /// Apple says only that a too long `apns-channel-id` is BadChannelId; the simulator's own ids have
    /// 24 characters and it takes up to this many.
    package static let maximumChannelIDLength = 64

    // MARK: broadcast (push listener)

    /// Whether a path on the push listener is a broadcast's (then ``checkBroadcastLine(_:)`` judges it).
    static func isBroadcastPath(_ path: String) -> Bool {
        path.utf8.starts(with: "/4/".utf8)
    }

    /// Duplicates, method and path; gives the bundle ID of `/4/broadcasts/apps/<bundle ID>`.
    package static func checkBroadcastLine(_ head: RequestHead) -> Result<String, SimulatorReason> {
        if head.hasDuplicates { return .failure(.duplicateHeaders) }
        guard head.method == "POST" else { return .failure(.methodNotAllowed) }
        guard let path = head.path, path.hasPrefix(broadcastPrefix) else { return .failure(.badPath) }
        let bundleID = String(path.dropFirst(broadcastPrefix.count))
        guard RequestRules.isTopicSyntax(bundleID) else { return .failure(.badPath) }
        return .success(bundleID)
    }

    /// Every broadcast header rule: `apns-request-id`, `apns-channel-id`, `apns-push-type`,
    /// `apns-expiration` and `apns-priority` (the last two are required for broadcasts).
    package static func checkBroadcastHeaders(
        _ head: RequestHead,
        bundleID: String,
        acceptUppercaseRequestID: Bool
    ) -> Result<BroadcastRequest, SimulatorReason> {
        if let reason = checkRequestID(head, acceptUppercase: acceptUppercaseRequestID) { return .failure(reason) }
        let channelID: String
        switch checkChannelID(head) {
        case .failure(let reason): return .failure(reason)
        case .success(let id): channelID = id
        }
        guard let pushType = head.pushType else { return .failure(.missingPushType) }
        guard isLiveActivity(pushType) else { return .failure(.invalidPushType) }
        guard let text = head.expiration, RequestRules.isEpochSeconds(text), let expiration = Int64(text) else {
            return .failure(.badExpirationDate)
        }
        guard let text = head.priority, text == "10" || text == "5" || text == "1", let priority = Int(text) else {
            return .failure(.badPriority)
        }
        return .success(
            BroadcastRequest(
                bundleID: bundleID, channelID: channelID, requestID: head.requestID, pushType: pushType,
                expiration: expiration, priority: priority))
    }

    /// A broadcast to `channel`: a channel that stores no message takes only `apns-expiration: 0`.
    static func checkExpiration(_ request: BroadcastRequest, channel: ChannelRegistry.Channel) -> SimulatorReason? {
        channel.storagePolicy == .noMessageStored && request.expiration != 0 ? .badExpirationDate : nil
    }

    // MARK: channel management (its own listener)

    /// Duplicates, path, then method (the methods a path takes depend on the path): gives the bundle ID
    /// and the call.
    package static func checkManagementLine(_ head: RequestHead) -> Result<(String, ManagementCall), SimulatorReason> {
        if head.hasDuplicates { return .failure(.duplicateHeaders) }
        guard let path = head.path, path.hasPrefix(managementPrefix) else { return .failure(.badPath) }
        let parts = path.dropFirst(managementPrefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, RequestRules.isTopicSyntax(String(parts[0])) else { return .failure(.badPath) }
        let bundleID = String(parts[0])
        switch (String(parts[1]), head.method ?? "") {
        case ("channels", "POST"): return .success((bundleID, .create))
        case ("channels", "GET"): return .success((bundleID, .read))
        case ("channels", "DELETE"): return .success((bundleID, .delete))
        case ("all-channels", "GET"): return .success((bundleID, .list))
        case ("channels", _), ("all-channels", _): return .failure(.methodNotAllowed)
        default: return .failure(.badPath)
        }
    }

    /// The create body: `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`. Not a JSON object:
    /// BadRequestPayload; another attribute, or a policy that is missing or not 0 or 1: BadRequestParams;
    /// `push-type` missing: MissingPushType, not LiveActivity (any case): InvalidPushType.
    package static func checkCreateBody(_ bytes: [UInt8]) -> Result<ChannelRegistry.StoragePolicy, SimulatorReason> {
        guard let object = try? JSONDecoder().decode([String: JSONScalar].self, from: Data(bytes)) else {
            return .failure(.badRequestPayload)
        }
        if object.keys.contains(where: { $0 != "message-storage-policy" && $0 != "push-type" }) {
            return .failure(.badRequestParams)
        }
        guard let pushType = object["push-type"] else { return .failure(.missingPushType) }
        guard case .string(let text) = pushType, isLiveActivity(text) else { return .failure(.invalidPushType) }
        guard case .integer(let raw) = object["message-storage-policy"],
            let policy = ChannelRegistry.StoragePolicy(rawValue: Int(raw))
        else { return .failure(.badRequestParams) }
        return .success(policy)
    }

    // MARK: shared

    /// The app in the path against the credential: a bundle ID with a push-type suffix is
    /// TopicDisallowed; one the token's key or the client certificate does not cover is TopicMismatch.
    package static func checkApp(_ bundleID: String, authorization: RequestAuthorization) -> SimulatorReason? {
        if PushType.implied(byTopic: bundleID) != nil { return .topicDisallowed }
        switch authorization {
        case .none:
            return nil
        case .token(let token):
            guard let topics = token.topics else { return nil }
            return topics.contains(bundleID) ? nil : .topicMismatch
        case .certificate(let identity):
            // The certificate's topics are the app's bundle ID and its suffixed variants.
            return identity.topics.contains { PushType.bundleID(ofTopic: $0) == bundleID } ? nil : .topicMismatch
        }
    }

    /// `apns-request-id`, when present, is a UUID in canonical lowercase form (BadMessageId otherwise).
    package static func checkRequestID(_ head: RequestHead, acceptUppercase: Bool) -> SimulatorReason? {
        guard let id = head.requestID else { return nil }
        return RequestRules.isCanonicalUUID(id, allowUppercase: acceptUppercase) ? nil : .badMessageId
    }

    /// `apns-channel-id` of a broadcast, a read or a delete: present (MissingChannelId) and well-formed
    /// (BadChannelId).
    package static func checkChannelID(_ head: RequestHead) -> Result<String, SimulatorReason> {
        guard let id = head.channelID else { return .failure(.missingChannelId) }
        return isChannelIDSyntax(id) ? .success(id) : .failure(.badChannelId)
    }

    /// Standard base64 with its padding (APNs' ids end in `=` where the length calls for it), not
    /// empty, at most ``maximumChannelIDLength`` characters.
    package static func isChannelIDSyntax(_ id: String) -> Bool {
        let utf8 = id.utf8
        guard !utf8.isEmpty, utf8.count <= maximumChannelIDLength, utf8.count % 4 == 0 else { return false }
        let padding = utf8.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return false }
        let isAlphabet: (UInt8) -> Bool = { c in
            c.isDigit || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == UInt8(ascii: "+")
                || c == UInt8(ascii: "/")
        }
        return utf8.dropLast(padding).allSatisfy(isAlphabet) && Data(base64Encoded: id) != nil
    }

    /// `liveactivity` in any case: Apple prints `Liveactivity`, `liveactivity` and `LiveActivity`.
    static func isLiveActivity(_ text: String) -> Bool {
        let expected = "liveactivity".utf8
        let utf8 = text.utf8
        guard utf8.count == expected.count else { return false }
        return zip(utf8, expected).allSatisfy { c, e in c == e || (c >= 0x41 && c <= 0x5A && c + 0x20 == e) }
    }
}

/// A value of the create body, as far as the rules care.
private enum JSONScalar: Decodable {
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    /// null, an array or an object.
    case other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else {
            self = .other
        }
    }
}
