import Synchronization
import NIOConcurrencyHelpers

/// Device tokens the simulated APNs knows, per topic and environment, and those it has seen go away.
/// Shared by every connection; safe from any thread.
public final class DeviceRegistry: Sendable {
    /// What happens to a token the registry has never heard of.
    public enum UnknownDevicePolicy: Sendable, Equatable {
        /// 400 BadDeviceToken, as APNs answers for a token it did not issue.
        case reject
        /// 200, for load tests with made-up tokens.
        case accept
        /// 200 for a token of this many bytes (APNs issues 32-byte tokens), 400 BadDeviceToken for any
        /// other length: made-up tokens of the right shape pass, a cut or padded one is refused as APNs
        /// refuses a token it cannot have issued.
        case acceptLength(bytes: Int)

        /// The verdict on a token the registry has no entry for. An all-zero token is never accepted here
        /// (registered, it is a device like any other): APNs issues none, and a credential probe sends one
        /// to be answered BadDeviceToken without delivering anything, here as there.
        func accepts(_ token: String) -> Bool {
            if token.utf8.allSatisfy({ $0 == UInt8(ascii: "0") }) { return false }
            return switch self {
            case .reject: false
            case .accept: true
            case .acceptLength(let bytes): token.utf8.count == 2 * bytes
            }
        }
    }

    /// A device: the app topic (bundle ID) it registered for and its environment (`nil`: any).
    public struct Device: Sendable, Equatable {
        public var topic: String?
        public var environment: SimulatorEnvironment?
        public init(topic: String? = nil, environment: SimulatorEnvironment? = nil) {
            self.topic = topic
            self.environment = environment
        }
    }

    /// The registry's answer for one request.
    enum Verdict: Equatable {
        case deliver
        case reject(SimulatorReason)
        /// 410 Unregistered with the time (seconds since 1970) APNs last saw the token invalid.
        case unregistered(since: Double)
    }

    /// One token's entry: a device and/or the time it went away. One dictionary, so a request hashes
    /// its token once; the registered topic's bundle ID is worked out at registration, not per request.
    private struct Entry {
        var device: Device?
        var bundleID: String?
        var unregisteredSince: Double?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var policy: UnknownDevicePolicy
        /// The share of accepted unknown tokens that get 410 Unregistered, and since when.
        var unregisteredShare: (fraction: Double, since: Double)?
    }

    private let state: NIOLockedValueBox<State>
    /// Bumped after every change, so a connection may keep the verdict for the token and topic it saw last
    /// (every request of a benchmark) until the registry changes, without the lock and the token's hash.
    private let changes = Synchronization.Atomic<Int>(0)

    /// The count of changes so far; read it before ``verdict(token:topic:environment:)`` to keep that verdict.
    var generation: Int { changes.load(ordering: .acquiring) }

    private func changed() { changes.wrappingAdd(1, ordering: .releasing) }

    public init(policy: UnknownDevicePolicy = .reject) {
        self.state = NIOLockedValueBox(State(policy: policy))
    }

    /// Registers (or re-registers) a token; it stops being unregistered.
    public func register(_ token: String, topic: String? = nil, environment: SimulatorEnvironment? = nil) {
        let key = token.lowercased()
        let entry = Entry(
            device: Device(topic: topic, environment: environment),
            bundleID: topic.map(PushType.bundleID(ofTopic:))
        )
        state.withLockedValue { $0.entries[key] = entry }
        changed()
    }

    /// Marks a token unregistered since `timestamp` (seconds since 1970): pushes get 410 Unregistered.
    public func unregister(_ token: String, at timestamp: Double) {
        state.withLockedValue { $0.entries[token.lowercased(), default: Entry()].unregisteredSince = timestamp }
        changed()
    }

    public func remove(_ token: String) {
        let key = token.lowercased()
        state.withLockedValue { $0.entries[key] = nil }
        changed()
    }

    public var policy: UnknownDevicePolicy {
        get { state.withLockedValue { $0.policy } }
        set {
            state.withLockedValue { $0.policy = newValue }
            changed()
        }
    }

    /// Of the tokens the registry has no entry for and its policy accepts, this share (0...1) gets 410
    /// Unregistered with `timestamp` (seconds since 1970) instead. Which ones is decided by a hash of
    /// the token, so a token keeps its answer for the registry's life (and from one run to the next),
    /// as a device that went away stays away. 0 removes it.
    public func unregister(fraction: Double, since timestamp: Double) {
        state.withLockedValue {
            $0.unregisteredShare = fraction > 0 ? (min(fraction, 1), timestamp) : nil
        }
        changed()
    }

    /// The share of accepted unknown tokens answered 410 Unregistered (``unregister(fraction:since:)``).
    public var unregisteredFraction: Double {
        state.withLockedValue { $0.unregisteredShare?.fraction ?? 0 }
    }

    /// Where `token` falls in [0, 1): FNV-1a over its characters, spread by SplitMix64's finaliser.
    static func position(of token: String) -> Double {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in token.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        hash = (hash ^ (hash >> 30)) &* 0xBF58_476D_1CE4_E5B9
        hash = (hash ^ (hash >> 27)) &* 0x94D0_49BB_1331_11EB
        hash ^= hash >> 31
        return Double(hash >> 11) / Double(1 << 53)
    }

    public func device(_ token: String) -> Device? {
        state.withLockedValue { $0.entries[token.lowercased()]?.device }
    }

    /// `token` is lowercase hex already (the validator normalises it).
    func verdict(token: String, topic: String, environment: SimulatorEnvironment) -> Verdict {
        let requestBundleID = PushType.bundleID(ofTopic: topic)
        return state.withLockedValue { state in
            let entry = state.entries[token]
            if let since = entry?.unregisteredSince { return .unregistered(since: since) }
            guard let device = entry?.device else {
                guard state.policy.accepts(token) else { return .reject(.badDeviceToken) }
                if let share = state.unregisteredShare, Self.position(of: token) < share.fraction {
                    return .unregistered(since: share.since)
                }
                return .deliver
            }
            if let env = device.environment, env != environment { return .reject(.badDeviceToken) }
            if let registered = entry?.bundleID, registered != requestBundleID {
                return .reject(.deviceTokenNotForTopic)
            }
            return .deliver
        }
    }
}
