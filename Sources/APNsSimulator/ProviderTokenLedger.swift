import NIOConcurrencyHelpers
import NIOCore

/// What the simulator saw of one key's provider tokens (``SimulatorObservation/providerTokens``), since
/// the start or the last ``SimulatorObservation/reset()``.
public struct ProviderTokenUsage: Sendable, Equatable {
    /// Distinct tokens of the key presented with a valid signature, whether let through or refused.
    public var distinctTokens = 0
    /// The most of them first presented within one window (``SimulatorConfiguration/tokensPerKeyWindow``,
    /// measured whether the per-key rule is on or off).
    public var mostInWindow = 0
    /// Those first presented within the window ending now.
    public var inWindowNow = 0
    /// Token changes a connection made too soon after it first used its current token (the per-connection
    /// rule, ``SimulatorConfiguration/tokenUpdateWindow``), each answered 429 TooManyProviderTokenUpdates.
    public var tooEarlyUpdates = 0
    /// Requests refused 429 TooManyProviderTokenUpdates because their connection was still unusable after
    /// such a change (the per-connection rule again); counted under the key of the connection's token.
    public var unusableConnectionRefusals = 0
    /// Requests refused 429 TooManyProviderTokenUpdates because they brought a token beyond
    /// ``SimulatorConfiguration/tokensPerKey`` new tokens of the key within the window (the per-key rule).
    public var keyLimitRefusals = 0

    public init() {}

    /// Every 429 TooManyProviderTokenUpdates of both rules for this key.
    public var tooManyProviderTokenUpdates: Int { tooEarlyUpdates + unusableConnectionRefusals + keyLimitRefusals }
}

/// The provider tokens of every connection of both listeners, per key id: the per-key rule (at most
/// `limit` distinct tokens of one key first let through within `window` seconds, counted across all
/// connections, as APNs does not tell apart tokens made by several providers of one team) and the
/// counts ``SimulatorObservation/providerTokens`` reports. Connections ask only when they meet a token
/// new to them, so the lock is not on the path of a request that reuses its connection's token.
package final class ProviderTokenLedger: Sendable {
    /// A token first seen longer ago than this has expired (an hour, plus the `iat` skew tolerated): it
    /// cannot verify again, so it is forgotten.
    static let horizon = ProviderTokenVerifier.tokenLifetime + ProviderTokenVerifier.futureSkew
    /// Tokens of one key remembered for the counts; beyond it (a client signing a token per request), a
    /// token seen again within the hour may be counted twice.
    static let presentedMemory = 100_000

    private struct Key {
        /// Tokens the per-key rule let through, and when it first did; kept for the hour a token lives,
        /// so a token let through long ago stays good on any connection.
        var admitted: [String: Double] = [:]
        var admittedOrder = CircularBuffer<(token: String, at: Double)>()
        /// Tokens presented (since the last reset), and when first, in order; and the times of those
        /// first presented within the window.
        var presented: [String: Double] = [:]
        var presentedOrder = CircularBuffer<(token: String, at: Double)>()
        var presentedInWindow = CircularBuffer<Double>()
        var usage = ProviderTokenUsage()
    }

    /// What the per-key rule says of a token.
    enum Admission: Equatable {
        case admitted
        case overLimit
    }

    /// At most this many tokens of one key first let through within the window; `nil`: no limit.
    let limit: Int?
    let window: Double
    private let clock: any SimulatorClock
    private let keys = NIOLockedValueBox<[String: Key]>([:])

    init(limit: Int?, window: Double, clock: any SimulatorClock) {
        self.limit = limit.flatMap { $0 > 0 ? $0 : nil }
        self.window = window
        self.clock = clock
    }

    /// A verified token new to its connection, which the connection's own rule lets through: noted, and
    /// let through unless `limit` other tokens of its key were first let through within the window.
    func admit(token: String, keyID: String, now: Double) -> Admission {
        keys.withLockedValue { keys in
            var key = keys[keyID, default: Key()]
            defer { keys[keyID] = key }
            let now = Self.present(token, at: now, in: &key, window: window)
            guard let limit else { return .admitted }
            while let first = key.admittedOrder.first, now - first.at > Self.horizon {
                key.admittedOrder.removeFirst()
                key.admitted[first.token] = nil
            }
            if key.admitted[token] != nil { return .admitted }
            let recent = key.admittedOrder.reversed().prefix { now - $0.at < window }.count
            if recent >= limit {
                key.usage.keyLimitRefusals += 1
                return .overLimit
            }
            key.admitted[token] = now
            key.admittedOrder.append((token, now))
            return .admitted
        }
    }

    /// A verified token its connection refused as a change too soon after its current token.
    func tooEarlyUpdate(token: String, keyID: String, now: Double) {
        keys.withLockedValue { keys in
            _ = Self.present(token, at: now, in: &keys[keyID, default: Key()], window: window)
            keys[keyID, default: Key()].usage.tooEarlyUpdates += 1
        }
    }

    /// A request refused on a connection still unusable after a change too soon.
    func refusedOnUnusableConnection(keyID: String) {
        keys.withLockedValue { $0[keyID, default: Key()].usage.unusableConnectionRefusals += 1 }
    }

    /// Each key's usage, with the tokens first presented within the window ending now.
    var usage: [String: ProviderTokenUsage] {
        let now = clock.now()
        return keys.withLockedValue { keys in
            keys.mapValues { key in
                var usage = key.usage
                usage.inWindowNow = key.presentedInWindow.reversed().prefix { now - $0 < window }.count
                return usage
            }
        }
    }

    /// Forgets the counts and which tokens were presented; the per-key rule keeps what it let through.
    func resetCounts() {
        keys.withLockedValue { keys in
            for id in keys.keys {
                keys[id]!.presented = [:]
                keys[id]!.presentedOrder.removeAll()
                keys[id]!.presentedInWindow.removeAll()
                keys[id]!.usage = ProviderTokenUsage()
            }
        }
    }

    /// Notes `token` as presented at `now`; returns the time used, never before the last noted (a
    /// system clock stepped back keeps the order).
    private static func present(_ token: String, at now: Double, in key: inout Key, window: Double) -> Double {
        let now = max(now, key.presentedOrder.last?.at ?? now, key.admittedOrder.last?.at ?? now)
        while let first = key.presentedOrder.first,
            now - first.at > horizon || key.presentedOrder.count >= presentedMemory
        {
            key.presentedOrder.removeFirst()
            key.presented[first.token] = nil
        }
        while let first = key.presentedInWindow.first,
            now - first >= window || key.presentedInWindow.count >= presentedMemory
        {
            key.presentedInWindow.removeFirst()
        }
        guard key.presented[token] == nil else { return now }
        key.presented[token] = now
        key.presentedOrder.append((token, now))
        key.presentedInWindow.append(now)
        key.usage.distinctTokens += 1
        key.usage.mostInWindow = max(key.usage.mostInWindow, key.presentedInWindow.count)
        return now
    }
}
