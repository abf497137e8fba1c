import Foundation
import NIOConcurrencyHelpers

/// Broadcast channels of the simulated APNs ("Sending channel management requests to APNs"), per app
/// (bundle ID), shared by the push listener (broadcasts) and the channel-management listener. One
/// simulator plays one environment, so its registry is that environment's: channels are not shared
/// across environments, as Apple's are not. Safe from any thread; change it at any time.
public final class ChannelRegistry: Sendable {
    /// How long APNs keeps a broadcast for devices that are offline (`message-storage-policy`).
    public enum StoragePolicy: Int, Sendable, CaseIterable {
        /// `0`, No Message Stored: one attempt; a broadcast must have `apns-expiration: 0`.
        case noMessageStored = 0
        /// `1`, Most Recent Message Stored: the newest broadcast is kept until it expires.
        case mostRecentMessageStored = 1
    }

    /// One channel.
    public struct Channel: Sendable, Equatable {
        /// Base64, as APNs hands it out in `apns-channel-id`.
        public var id: String
        public var bundleID: String
        public var storagePolicy: StoragePolicy

        public init(id: String, bundleID: String, storagePolicy: StoragePolicy) {
            self.id = id
            self.bundleID = bundleID
            self.storagePolicy = storagePolicy
        }
    }

    /// A channel to create at start; `id` nil makes one up.
    public struct Preset: Sendable, Equatable {
        public var bundleID: String
        public var storagePolicy: StoragePolicy
        public var id: String?

        public init(bundleID: String, storagePolicy: StoragePolicy, id: String? = nil) {
            self.bundleID = bundleID
            self.storagePolicy = storagePolicy
            self.id = id
        }
    }

    /// Apple's limit: "up to 10,000 channels per application in each environment".
    public static let defaultLimit = 10_000

    private struct State {
        var byID: [String: Channel] = [:]
        /// Each app's channel ids in creation order.
        var byApp: [String: [String]] = [:]
        /// Deleted ids: "the same ID can never come back".
        var retired: Set<String> = []
        var disabled: Set<String>
        var limit: Int
    }

    private let state: NIOLockedValueBox<State>

    public init(limit: Int = ChannelRegistry.defaultLimit, broadcastDisabled: Set<String> = []) {
        self.state = NIOLockedValueBox(State(disabled: broadcastDisabled, limit: limit))
    }

    /// Channels one app may have; a create beyond it is 400 CannotCreateChannelConfig.
    public var limit: Int {
        get { state.withLockedValue { $0.limit } }
        set { state.withLockedValue { $0.limit = newValue } }
    }

    /// Whether the app has the broadcast capability (otherwise both endpoints answer FeatureNotEnabled).
    public func isBroadcastEnabled(bundleID: String) -> Bool {
        state.withLockedValue { !$0.disabled.contains(bundleID) }
    }

    /// Gives or takes an app's broadcast capability. Taking it deletes all the app's channels, for good,
    /// as Apple does when the capability is switched off.
    public func setBroadcastEnabled(_ enabled: Bool, bundleID: String) {
        state.withLockedValue { state in
            if enabled {
                state.disabled.remove(bundleID)
                return
            }
            state.disabled.insert(bundleID)
            for id in state.byApp.removeValue(forKey: bundleID) ?? [] {
                state.byID[id] = nil
                state.retired.insert(id)
            }
        }
    }

    /// Creates a channel (`id` nil: a new random base64 id). Throws FeatureNotEnabled, or
    /// CannotCreateChannelConfig at the app's limit, or BadChannelId for a given id that is not
    /// well-formed, already taken or deleted before.
    @discardableResult
    public func create(bundleID: String, storagePolicy: StoragePolicy, id: String? = nil) throws(SimulatorReason)
        -> Channel
    {
        if let id, !BroadcastRules.isChannelIDSyntax(id) { throw .badChannelId }
        let result = state.withLockedValue { state -> Result<Channel, SimulatorReason> in
            if state.disabled.contains(bundleID) { return .failure(.featureNotEnabled) }
            if state.byApp[bundleID, default: []].count >= state.limit { return .failure(.cannotCreateChannelConfig) }
            let channelID: String
            if let id {
                guard state.byID[id] == nil, !state.retired.contains(id) else { return .failure(.badChannelId) }
                channelID = id
            } else {
                var made = Self.makeID()
                while state.byID[made] != nil || state.retired.contains(made) { made = Self.makeID() }
                channelID = made
            }
            let channel = Channel(id: channelID, bundleID: bundleID, storagePolicy: storagePolicy)
            state.byID[channelID] = channel
            state.byApp[bundleID, default: []].append(channelID)
            return .success(channel)
        }
        return try result.get()
    }

    /// The channel with this id, whatever its app.
    public func channel(_ id: String) -> Channel? {
        state.withLockedValue { $0.byID[id] }
    }

    /// The channel with this id if it belongs to `bundleID`.
    public func channel(_ id: String, bundleID: String) -> Channel? {
        state.withLockedValue { state in
            guard let channel = state.byID[id], channel.bundleID == bundleID else { return nil }
            return channel
        }
    }

    /// An app's channels, oldest first.
    public func channels(bundleID: String) -> [Channel] {
        state.withLockedValue { state in (state.byApp[bundleID] ?? []).compactMap { state.byID[$0] } }
    }

    /// How many channels an app has.
    public func count(bundleID: String) -> Int {
        state.withLockedValue { $0.byApp[bundleID]?.count ?? 0 }
    }

    /// Deletes a channel of `bundleID`; false when it has no such channel. Its id is never reused.
    @discardableResult
    public func delete(_ id: String, bundleID: String) -> Bool {
        state.withLockedValue { state in
            guard let channel = state.byID[id], channel.bundleID == bundleID else { return false }
            state.byID[id] = nil
            state.byApp[bundleID]?.removeAll { $0 == id }
            if state.byApp[bundleID]?.isEmpty == true { state.byApp[bundleID] = nil }
            state.retired.insert(id)
            return true
        }
    }

    /// 16 random bytes in base64 (24 characters): Apple's ids are random base64 of a size clients must
    /// not rely on.
    static func makeID() -> String {
        var random = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in bytes.indices { bytes[i] = random.next() }
        return Data(bytes).base64EncodedString()
    }
}
