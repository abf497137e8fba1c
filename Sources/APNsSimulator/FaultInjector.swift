import Synchronization
import NIOConcurrencyHelpers

/// Faults the simulator injects, set at start and changeable at any time from any thread; every request
/// reads the current settings, so a change applies to live connections from their next request.
public final class FaultInjector: Sendable {
    /// Added response time.
    public enum Latency: Sendable, Equatable {
        case none
        case fixed(Duration)
        /// Uniformly distributed between the two bounds.
        case uniform(Duration, Duration)
    }

    /// Per-connection behaviours (each connection counts its own requests).
    public struct ConnectionFaults: Sendable, Equatable {
        /// Send GOAWAY (with `goAwayReason`) after this many requests on a connection.
        public var goAwayAfter: Int?
        public var goAwayReason: SimulatorReason = .shutdown
        /// Close the TCP connection abruptly (no GOAWAY, no answer) on this request number.
        public var closeAfter: Int?
        /// After answering anything but 200, lower MAX_CONCURRENT_STREAMS to this value, as APNs does.
        public var dropStreamsAfterRejection: UInt32?
        public init() {}
    }

    /// What one request gets.
    struct Decision {
        var reason: SimulatorReason?
        var delayNanoseconds: Int64
        var connection: ConnectionFaults
    }

    private func refresh() {
        let on = state.withLockedValue { state in
            !state.rates.isEmpty || !state.scripts.isEmpty || !state.script.isEmpty || state.latency != .none
                || state.connection != ConnectionFaults()
        }
        active.store(on, ordering: .relaxed)
    }

    private struct State {
        var rates: [(SimulatorReason, Double)] = []
        var scripts: [String: [SimulatorReason?]] = [:]
        var script: [SimulatorReason?] = []
        var latency: Latency = .none
        var connection = ConnectionFaults()
        var random: SplitMix64
    }

    private let state: NIOLockedValueBox<State>
    /// False while no fault at all is set: requests then skip the lock.
    private let active = Synchronization.Atomic(false)

    /// `seed` makes rate-based faults reproducible.
    public init(seed: UInt64 = 0x5EED) {
        self.state = NIOLockedValueBox(State(random: SplitMix64(seed: seed)))
    }

    /// Answer `reason` to this fraction (0...1) of otherwise successful requests; 0 removes it.
    public func setRate(_ reason: SimulatorReason, _ rate: Double) {
        state.withLockedValue { state in
            state.rates.removeAll { $0.0 == reason }
            if rate > 0 { state.rates.append((reason, min(rate, 1))) }
        }
        refresh()
    }

    public var rates: [SimulatorReason: Double] {
        state.withLockedValue { Dictionary($0.rates.map { ($0.0, $0.1) }, uniquingKeysWith: { $1 }) }
    }

    /// The next requests to `deviceToken` get these answers in order (`nil`: no fault), then rates apply again.
    public func script(deviceToken: String, _ steps: [SimulatorReason?]) {
        state.withLockedValue { $0.scripts[deviceToken.lowercased()] = steps }
        refresh()
    }

    /// The next broadcasts to `channelID` (compared exactly: base64 is case-sensitive) get these answers
    /// in order (`nil`: no fault), then rates apply again.
    public func script(channelID: String, _ steps: [SimulatorReason?]) {
        state.withLockedValue { $0.scripts[Self.channelTarget(channelID)] = steps }
        refresh()
    }

    /// The script key of a channel: apart from device tokens, which are hex.
    static func channelTarget(_ channelID: String) -> String { "channel:" + channelID }

    /// The next requests, whatever their token or listener, get these answers in order (`nil`: no fault).
    public func script(_ steps: [SimulatorReason?]) {
        state.withLockedValue { $0.script = steps }
        refresh()
    }

    public var latency: Latency {
        get { state.withLockedValue { $0.latency } }
        set {
            state.withLockedValue { $0.latency = newValue }
            refresh()
        }
    }

    public var connection: ConnectionFaults {
        get { state.withLockedValue { $0.connection } }
        set {
            state.withLockedValue { $0.connection = newValue }
            refresh()
        }
    }

    /// Removes every fault.
    public func clear() {
        state.withLockedValue { state in
            state.rates = []
            state.scripts = [:]
            state.script = []
            state.latency = .none
            state.connection = ConnectionFaults()
        }
        refresh()
    }

    /// Draws the fault for one request. Only an otherwise valid request (`eligible`) takes a scripted
    /// or random reason: the script of its target (a device token, or ``channelTarget(_:)`` of a
    /// broadcast's channel; "" for none) first, then the global script, then the rates. Latency and
    /// connection faults apply to every request.
    func decide(target deviceToken: String, eligible: Bool) -> Decision {
        guard active.load(ordering: .relaxed) else {
            return Decision(reason: nil, delayNanoseconds: 0, connection: ConnectionFaults())
        }
        return state.withLockedValue { state in
            var reason: SimulatorReason?
            if !eligible {
                // no reason drawn: the request already has one
            } else if var steps = state.scripts[deviceToken], !steps.isEmpty {
                reason = steps.removeFirst()
                state.scripts[deviceToken] = steps.isEmpty ? nil : steps
            } else if !state.script.isEmpty {
                reason = state.script.removeFirst()
            } else if !state.rates.isEmpty {
                let draw = state.random.nextUnit()
                var cumulative = 0.0
                for (candidate, rate) in state.rates {
                    cumulative += rate
                    if draw < cumulative {
                        reason = candidate
                        break
                    }
                }
            }
            let delay: Int64
            switch state.latency {
            case .none: delay = 0
            case .fixed(let d): delay = d.nanoseconds
            case .uniform(let low, let high):
                let lo = low.nanoseconds
                let hi = max(lo, high.nanoseconds)
                delay = lo + Int64(state.random.nextUnit() * Double(hi - lo))
            }
            return Decision(reason: reason, delayNanoseconds: delay, connection: state.connection)
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// Small, fast, seedable generator (Steele et al., SplitMix64); faults need reproducibility, not secrecy.
struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    mutating func nextUnit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
