import Synchronization
import NIOConcurrencyHelpers

/// Device tokens the simulated APNs knows, per topic and environment, and those it has seen go away.
/// Shared by every connection; safe from any thread.
public final class DeviceRegistry: Sendable {
    /// What happens to a token the registry has never heard of.
    public enum UnknownDevicePolicy: Sendable {
        /// 400 BadDeviceToken, as APNs answers for a token it did not issue.
        case reject
        /// 200, for load tests with made-up tokens.
        case accept
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
                return state.policy == .accept ? .deliver : .reject(.badDeviceToken)
            }
            if let env = device.environment, env != environment { return .reject(.badDeviceToken) }
            if let registered = entry?.bundleID, registered != requestBundleID {
                return .reject(.deviceTokenNotForTopic)
            }
            return .deliver
        }
    }
}
