import Foundation

/// Ways to make a running simulator misbehave, as `apns-simulator` and `apns-worker dev` take them on
/// their command lines: tokens that went away, a share of devices gone, throttling, server errors and
/// dropped connections. Each is one of the simulator's own mechanisms (``DeviceRegistry``,
/// ``FaultInjector``) set from plain values; ``apply(to:)`` sets them on a running simulator.
public struct SimulatorMisbehaviour: Sendable, Equatable {
    /// Tokens answered 410 Unregistered, with the time (seconds since 1970) they went away; `nil`: when
    /// ``apply(to:)`` runs.
    public var unregisteredTokens: [String: Double?] = [:]
    /// The share (0...1) of unknown tokens the registry accepts that get 410 Unregistered, picked by a
    /// hash of each token (``DeviceRegistry/unregister(fraction:since:)``).
    public var unregisteredFraction = 0.0
    /// The share (0...1) of otherwise successful requests answered 429 TooManyRequests.
    public var throttleFraction = 0.0
    /// The share (0...1) of otherwise successful requests answered a server error: half 500
    /// InternalServerError, half 503 ServiceUnavailable.
    public var faultFraction = 0.0
    /// Any reason of Apple's tables at a rate (0...1), added to the two above.
    public var reasonRates: [SimulatorReason: Double] = [:]
    /// The order the reasons were added in (`--fault` flags in command-line order): the simulator
    /// draws a request's fault from its rates in order, from a fixed seed, so the same flags give
    /// the same answers every run.
    private var reasonOrder: [SimulatorReason] = []
    /// Close a connection abruptly (no answer, no GOAWAY) on its Nth request.
    public var closeAfter: Int?

    public init() {}

    /// Whether anything is set.
    public var isEmpty: Bool { self == SimulatorMisbehaviour() }

    /// The fault rates of every request: throttling, the two server errors and ``reasonRates``.
    public var rates: [SimulatorReason: Double] {
        var rates = reasonRates
        rates[.tooManyRequests, default: 0] += throttleFraction
        rates[.internalServerError, default: 0] += faultFraction / 2
        rates[.serviceUnavailable, default: 0] += faultFraction / 2
        return rates.filter { $0.value > 0 }
    }

    /// The problems of these settings, as the flags name them; empty when they can be applied.
    public var problems: [String] {
        var problems: [String] = []
        for (flag, value) in [
            ("--unregistered-fraction", unregisteredFraction), ("--throttle-fraction", throttleFraction),
            ("--fault-fraction", faultFraction),
        ] where !(0...1).contains(value) {
            problems.append("\(flag) wants a share from 0 to 1, got \(value)")
        }
        for (reason, rate) in reasonRates where !(0...1).contains(rate) {
            problems.append("--fault \(reason.rawValue) wants a rate from 0 to 1, got \(rate)")
        }
        let total = rates.values.reduce(0, +)
        if total > 1.000_000_1 {
            problems.append(
                "--throttle-fraction, --fault-fraction and --fault rates add up to \(total); one request gets one answer, so at most 1"
            )
        }
        for token in unregisteredTokens.keys where !Self.isToken(token) {
            problems.append(
                "--unregistered wants a device token in hex (an even number of digits), got \(token.count) characters")
        }
        if let closeAfter, closeAfter < 1 {
            problems.append("--close-after wants a request number from 1, got \(closeAfter)")
        }
        return problems
    }

    /// Throws the first of ``problems``, if any.
    public func check() throws(APNsSimulatorConfigurationError) {
        if let problem = problems.first { throw APNsSimulatorConfigurationError(description: problem) }
    }

    /// Sets everything on `simulator`: its device registry and its fault injector (which keeps its other
    /// settings, such as latency).
    public func apply(to simulator: Simulator) {
        let now = Date().timeIntervalSince1970
        for (token, since) in unregisteredTokens {
            simulator.devices.unregister(token, at: since ?? now)
        }
        if unregisteredFraction > 0 { simulator.devices.unregister(fraction: unregisteredFraction, since: now) }
        // In a fixed order: `--fault` reasons as given (those set directly on `reasonRates` after
        // them, by name), then the throttling and server-error shares.
        let rates = self.rates
        let named = reasonRates.keys.filter { !reasonOrder.contains($0) }.sorted { $0.rawValue < $1.rawValue }
        var seen: Set<SimulatorReason> = []
        for reason in reasonOrder + named + [.tooManyRequests, .internalServerError, .serviceUnavailable]
        where seen.insert(reason).inserted {
            if let rate = rates[reason] { simulator.faults.setRate(reason, rate) }
        }
        if let closeAfter {
            var connection = simulator.faults.connection
            connection.closeAfter = closeAfter
            simulator.faults.connection = connection
        }
    }

    /// `TOKEN[=UNIXSECONDS]`, as `--unregistered` takes it.
    public mutating func addUnregistered(_ spec: String) throws(APNsSimulatorConfigurationError) {
        let (token, since) = Self.split(spec)
        var seconds: Double?
        if let since {
            guard let value = Double(since) else {
                throw APNsSimulatorConfigurationError(
                    description: "--unregistered wants TOKEN[=UNIX-SECONDS], got a time of \(since)")
            }
            seconds = value
        }
        unregisteredTokens[token.lowercased()] = seconds
    }

    /// `REASON=RATE`, as `--fault` takes it: any reason of Apple's tables.
    public mutating func addFault(_ spec: String) throws(APNsSimulatorConfigurationError) {
        let (name, rate) = Self.split(spec)
        guard let reason = SimulatorReason(named: name), let rate = rate.flatMap(Double.init) else {
            throw APNsSimulatorConfigurationError(
                description: "--fault wants REASON=RATE with a reason from Apple's table, got \(spec)")
        }
        reasonOrder.removeAll { $0 == reason }
        reasonOrder.append(reason)
        reasonRates[reason] = rate
    }

    static func split(_ spec: String) -> (String, String?) {
        guard let eq = spec.firstIndex(of: "=") else { return (spec, nil) }
        return (String(spec[..<eq]), String(spec[spec.index(after: eq)...]))
    }

    static func isToken(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.count % 2 == 0 && token.utf8.allSatisfy(\.isHexDigit)
    }
}
