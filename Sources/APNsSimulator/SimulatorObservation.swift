import Synchronization
import NIOConcurrencyHelpers
import NIOCore

/// One notification the simulator accepted (answered 200).
public struct NotificationRecord: Sendable {
    public var deviceToken: String
    public var topic: String
    public var pushType: String?
    public var apnsID: String
    /// Every request header as received, pseudo-headers included, in order.
    public var headers: [(name: String, value: String)]
    public var payload: [UInt8]
    public var connectionID: Int
    /// Seconds since 1970, by the simulator's clock.
    public var receivedAt: Double
}

/// One broadcast the simulator accepted (answered 200) on a channel.
public struct BroadcastRecord: Sendable {
    public var bundleID: String
    public var channelID: String
    /// The `apns-request-id` answered (the request's, or made up).
    public var requestID: String
    /// The `apns-unique-id` answered.
    public var uniqueID: String
    /// `apns-push-type` as received (any case of `liveactivity`).
    public var pushType: String
    public var expiration: Int64
    public var priority: Int
    /// Every request header as received, pseudo-headers included, in order.
    public var headers: [(name: String, value: String)]
    public var payload: [UInt8]
    public var connectionID: Int
    /// Seconds since 1970, by the simulator's clock.
    public var receivedAt: Double
}

/// A counter key: the status answered and, for failures, the reason.
public struct ResponseKey: Hashable, Sendable, CustomStringConvertible {
    public var status: Int
    public var reason: String?
    public init(status: Int, reason: String?) {
        self.status = status
        self.reason = reason
    }
    public var description: String { reason.map { "\(status) \($0)" } ?? "\(status)" }
}

/// What the simulator saw: accepted notifications and broadcasts (bounded), broadcasts per channel,
/// device pushes accepted more than once (by `apns-id`, bounded), answers per status/reason (both
/// listeners), live connections and streams. Safe from any thread.
public final class SimulatorObservation: Sendable {
    private struct Recorded {
        var records: CircularBuffer<NotificationRecord> = CircularBuffer()
        var limit: Int
        var dropped = 0
        var counters: [ResponseKey: Int] = [:]
        var broadcasts: CircularBuffer<BroadcastRecord> = CircularBuffer()
        var droppedBroadcasts = 0
        var broadcastCounts: [String: Int] = [:]
        var acceptedIDs: AcceptedIDCounter
    }

    private let recorded: NIOLockedValueBox<Recorded>
    private let tokenLedger: ProviderTokenLedger
    private let connections = Synchronization.Atomic<Int>(0)
    private let streams = Synchronization.Atomic<Int>(0)
    private let connectionsTotal = Synchronization.Atomic<Int>(0)
    private let goAwaysSent = Synchronization.Atomic<Int>(0)
    /// 200s counted without the lock while nothing is recorded or counted by `apns-id`: the
    /// benchmark's hot path.
    private let unrecordedSuccesses = Synchronization.Atomic<Int>(0)
    /// Records or `apns-id`s are kept: a 200 takes the lock.
    private let recording: Synchronization.Atomic<Bool>

    /// `recordLimit`: most recent accepted notifications kept (older ones are dropped); 0 switches
    /// recording off, which benchmarks want. `apnsIDLimit`: distinct `apns-id`s whose acceptances are
    /// counted (``repeatedAcceptances``); 0 counts none.
    public convenience init(recordLimit: Int, apnsIDLimit: Int = 0) {
        self.init(
            recordLimit: recordLimit, apnsIDLimit: apnsIDLimit,
            tokenLedger: ProviderTokenLedger(limit: nil, window: 20 * 60, clock: SystemSimulatorClock()))
    }

    init(recordLimit: Int, apnsIDLimit: Int, tokenLedger: ProviderTokenLedger) {
        self.recorded = NIOLockedValueBox(
            Recorded(limit: max(0, recordLimit), acceptedIDs: AcceptedIDCounter(limit: apnsIDLimit)))
        self.recording = Synchronization.Atomic(recordLimit > 0 || apnsIDLimit > 0)
        self.tokenLedger = tokenLedger
    }

    /// Provider tokens per key id: distinct tokens presented, the most first presented within one window
    /// and within the window ending now, and the requests each token rule refused (429
    /// TooManyProviderTokenUpdates). A key whose tokens no request brought is absent.
    public var providerTokens: [String: ProviderTokenUsage] { tokenLedger.usage }

    /// ``providerTokens`` of one key id (all zero when none was seen).
    public func providerTokens(keyID: String) -> ProviderTokenUsage {
        providerTokens[keyID] ?? ProviderTokenUsage()
    }

    /// Accepted notifications, oldest first (at most the record limit).
    public var records: [NotificationRecord] { recorded.withLockedValue { Array($0.records) } }

    /// Accepted notifications not kept because of the record limit.
    public var droppedRecords: Int { recorded.withLockedValue { $0.dropped } }

    /// Accepted broadcasts, oldest first (at most the record limit, kept apart from notifications).
    public var broadcasts: [BroadcastRecord] { recorded.withLockedValue { Array($0.broadcasts) } }

    /// Accepted broadcasts not kept because of the record limit.
    public var droppedBroadcasts: Int { recorded.withLockedValue { $0.droppedBroadcasts } }

    /// Accepted broadcasts per channel id, counted whatever the record limit.
    public var broadcastCounts: [String: Int] { recorded.withLockedValue { $0.broadcastCounts } }

    /// Accepted broadcasts on one channel.
    public func broadcastCount(channelID: String) -> Int {
        recorded.withLockedValue { $0.broadcastCounts[channelID] ?? 0 }
    }

    public var recordLimit: Int {
        get { recorded.withLockedValue { $0.limit } }
        set {
            recorded.withLockedValue { state in
                state.limit = max(0, newValue)
                recording.store(state.limit > 0 || state.acceptedIDs.limit > 0, ordering: .relaxed)
                while state.records.count > state.limit {
                    state.records.removeFirst()
                    state.dropped += 1
                }
                while state.broadcasts.count > state.limit {
                    state.broadcasts.removeFirst()
                    state.droppedBroadcasts += 1
                }
            }
        }
    }

    /// Device pushes accepted (answered 200) more than once, by the `apns-id` the request carried.
    ///
    /// A push counts as accepted when the simulator decides to answer 200, before any injected latency:
    /// APNs may deliver a notification whose answer its client never reads (a connection lost, a
    /// process killed), so a push sent again after such a loss is a second push to the device.
    /// Refused pushes (any other status), broadcasts and channel-management calls are not counted.
    public var repeatedAcceptances: RepeatedAcceptances {
        recorded.withLockedValue { $0.acceptedIDs.summary }
    }

    /// How many times the device push with this `apns-id` (either case) was accepted; 0 when it was
    /// not, or is not tracked.
    public func acceptances(apnsID: String) -> Int {
        recorded.withLockedValue { $0.acceptedIDs.acceptances(of: apnsID) }
    }

    /// Distinct `apns-id`s whose acceptances are counted; lowering it forgets nothing already counted.
    public var apnsIDLimit: Int {
        get { recorded.withLockedValue { $0.acceptedIDs.limit } }
        set {
            recorded.withLockedValue { state in
                state.acceptedIDs.limit = max(0, newValue)
                recording.store(state.limit > 0 || state.acceptedIDs.limit > 0, ordering: .relaxed)
            }
        }
    }

    /// Answers so far, by status and reason.
    public var counters: [ResponseKey: Int] {
        var counters = recorded.withLockedValue { $0.counters }
        let fast = unrecordedSuccesses.load(ordering: .relaxed)
        if fast > 0 { counters[ResponseKey(status: 200, reason: nil), default: 0] += fast }
        return counters
    }

    /// Answers with this status (and reason, when given).
    public func count(status: Int, reason: SimulatorReason? = nil) -> Int {
        counters.filter { $0.key.status == status && (reason == nil || $0.key.reason == reason?.rawValue) }
            .reduce(0) { $0 + $1.value }
    }

    public func count(_ reason: SimulatorReason) -> Int { count(status: reason.status, reason: reason) }

    public var liveConnections: Int { connections.load(ordering: .relaxed) }
    public var liveStreams: Int { streams.load(ordering: .relaxed) }
    public var totalConnections: Int { connectionsTotal.load(ordering: .relaxed) }
    public var goAways: Int { goAwaysSent.load(ordering: .relaxed) }

    /// Forgets records and counters, the provider-token counts included (live gauges stay, and so does
    /// what the per-key token rule let through).
    public func reset() {
        tokenLedger.resetCounts()
        recorded.withLockedValue { state in
            state.records.removeAll()
            state.counters = [:]
            state.dropped = 0
            state.broadcasts.removeAll()
            state.droppedBroadcasts = 0
            state.broadcastCounts = [:]
            state.acceptedIDs.removeAll()
        }
        unrecordedSuccesses.store(0, ordering: .relaxed)
    }

    /// Counters as text lines, `status reason count`, sorted, then `broadcasts CHANNEL count` per channel,
    /// then `tokens KEYID N distinct M most-in-window R refused` per token key,
    /// then (while `apns-id`s are counted) `accepted twice IDS apns-ids EXTRA extra`; what the executable
    /// prints on exit.
    public func summary() -> String {
        let counters = self.counters.sorted {
            ($0.key.status, $0.key.reason ?? "") < ($1.key.status, $1.key.reason ?? "")
        }
        var lines = counters.map { "\($0.key) \($0.value)" }
        lines += broadcastCounts.sorted { $0.key < $1.key }.map { "broadcasts \($0.key) \($0.value)" }
        lines += providerTokens.sorted { $0.key < $1.key }.map { key, usage in
            "tokens \(key) \(usage.distinctTokens) distinct \(usage.mostInWindow) most-in-window "
                + "\(usage.tooManyProviderTokenUpdates) refused"
        }
        lines.append("connections total \(totalConnections)")
        lines.append("goaway sent \(goAways)")
        if apnsIDLimit > 0 {
            let repeated = repeatedAcceptances
            lines.append("accepted twice \(repeated.ids) apns-ids \(repeated.extra) extra")
        }
        return lines.joined(separator: "\n")
    }

    // MARK: recording (from the connections)

    /// One answer. `acceptedPush`: a device push answered 200, with the `apns-id` its request carried.
    func answered(
        status: Int, reason: SimulatorReason?, acceptedPush: AcceptedPush? = nil,
        record: @autoclosure () -> NotificationRecord?
    ) {
        if status == 200, !recording.load(ordering: .relaxed) {
            unrecordedSuccesses.wrappingAdd(1, ordering: .relaxed)
            return
        }
        recorded.withLockedValue { state in
            state.counters[ResponseKey(status: status, reason: reason?.rawValue), default: 0] += 1
            if let acceptedPush, state.acceptedIDs.limit > 0 { state.acceptedIDs.accept(acceptedPush.apnsID) }
            guard state.limit > 0, let record = record() else { return }
            if state.records.count >= state.limit {
                state.records.removeFirst()
                state.dropped += 1
            }
            state.records.append(record)
        }
    }

    /// A broadcast answered 200 (its answer is counted by ``answered(status:reason:record:)``).
    func broadcastAccepted(channelID: String, record: @autoclosure () -> BroadcastRecord) {
        recorded.withLockedValue { state in
            state.broadcastCounts[channelID, default: 0] += 1
            guard state.limit > 0 else { return }
            if state.broadcasts.count >= state.limit {
                state.broadcasts.removeFirst()
                state.droppedBroadcasts += 1
            }
            state.broadcasts.append(record())
        }
    }

    func connectionOpened() {
        connections.wrappingAdd(1, ordering: .relaxed)
        connectionsTotal.wrappingAdd(1, ordering: .relaxed)
    }
    func connectionClosed() { connections.wrappingSubtract(1, ordering: .relaxed) }
    func streamOpened() { streams.wrappingAdd(1, ordering: .relaxed) }
    func streamsClosed(_ n: Int) { streams.wrappingSubtract(n, ordering: .relaxed) }
    func goAwaySent() { goAwaysSent.wrappingAdd(1, ordering: .relaxed) }
}

/// A device push the simulator answers 200.
struct AcceptedPush {
    /// The `apns-id` the request carried; `nil` when APNs made one up.
    var apnsID: String?
}
