import NIOCore

/// The bookkeeping of a connection pool, without I/O: which connection takes the next request,
/// who waits, when to connect again. Kept behind the pool's lock; every method returns what to do,
/// and the pool does it after unlocking.
///
/// - `slots` connections are kept open; each slot reconnects on its own with exponential backoff
///   and jitter after a failure, at once after a healthy connection ended (up for `healthyAfter`, or
///   told to go away after answering requests).
/// - A request goes to the ready connection with the fewest requests in flight that still has a free
///   stream; when none has, it waits in a bounded FIFO.
/// - A connection that received GOAWAY (draining) takes nothing new; its slot reconnects meanwhile.
struct APNsPoolStateMachine<Waiter: Sendable>: Sendable {
    struct Backoff: Sendable {
        var base: TimeAmount
        var maximum: TimeAmount
        /// A connection that stayed up this long resets the slot's failure count.
        var healthyAfter: TimeAmount
    }

    enum SlotPhase: Equatable {
        case idle
        case connecting(id: Int)
        case ready(id: Int, since: NIODeadline)
        case backingOff
    }

    struct Slot {
        var phase = SlotPhase.idle
        var failures = 0
    }

    struct Load {
        var capacity: Int
        var inFlight: Int
        var slot: Int?
        /// A request finished on it: the connection worked.
        var answered = false

        /// A request on it finished (one dictionary access for both changes, on every request's path).
        mutating func finished() {
            inFlight -= 1
            answered = true
        }
    }

    enum Action {
        case connect(slot: Int, id: Int)
        case reconnect(slot: Int, after: TimeAmount)
        case dispatch(Waiter, connectionID: Int)
        case fail(Waiter, APNsClientError)
        case close(connectionID: Int)
    }

    private(set) var slots: [Slot]
    /// Open connections (ready or draining) by id.
    private(set) var loads: [Int: Load] = [:]
    private var waiters = CircularBuffer<(id: Int, waiter: Waiter)>()
    private let maximumWaiters: Int
    private let backoff: Backoff
    private var nextID = 1
    private(set) var shuttingDown = false

    init(connections: Int, maximumWaiters: Int, backoff: Backoff) {
        self.slots = Array(repeating: Slot(), count: max(1, connections))
        self.maximumWaiters = maximumWaiters
        self.backoff = backoff
    }

    var waiterCount: Int { waiters.count }

    /// What the pool holds right now, for metrics.
    var statistics: APNsPoolStatistics {
        var statistics = APNsPoolStatistics()
        for slot in slots {
            switch slot.phase {
            case .ready: statistics.readyConnections += 1
            case .connecting: statistics.connectingConnections += 1
            case .idle, .backingOff: break
            }
        }
        for load in loads.values {
            if load.slot == nil {
                statistics.drainingConnections += 1
            } else {
                statistics.streamCapacity += load.capacity
            }
        }
        statistics.streamsInUse = inFlight
        statistics.waitingRequests = waiterCount
        return statistics
    }
    var inFlight: Int { loads.values.reduce(0) { $0 + $1.inFlight } }

    /// A request wants a connection. `waiterID` identifies it if it has to wait.
    mutating func acquire(_ waiter: Waiter, waiterID: Int) -> [Action] {
        if shuttingDown {
            return [.fail(waiter, APNsClientError(.shutDown, "client is shutting down", mayHaveReachedAPNs: false))]
        }
        var actions = startIdleSlots()
        if waiters.isEmpty, let id = leastLoaded() {
            loads[id]!.inFlight += 1
            actions.append(.dispatch(waiter, connectionID: id))
        } else if waiters.count < maximumWaiters {
            waiters.append((waiterID, waiter))
        } else {
            actions.append(
                .fail(
                    waiter,
                    APNsClientError(
                        .queueFull, "every stream is busy and the wait queue is full", mayHaveReachedAPNs: false)))
        }
        return actions
    }

    /// `acquire`'s common case without its bookkeeping: the least loaded connection, taken at once,
    /// when nothing waits and no slot needs connecting. `nil`: call `acquire`.
    mutating func dispatchAtOnce() -> Int? {
        guard !shuttingDown, waiters.isEmpty, !slots.contains(where: { $0.phase == .idle }),
            let id = leastLoaded()
        else { return nil }
        loads[id]!.inFlight += 1
        return id
    }

    /// `release`'s common case: the stream is given back and there is nothing else to do (nobody
    /// waits, the connection is not draining, no shutdown). `false`: nothing changed; call `release`.
    mutating func releaseQuietly(connectionID: Int) -> Bool {
        guard !shuttingDown, waiters.isEmpty, let load = loads[connectionID], load.slot != nil else { return false }
        loads[connectionID]!.finished()
        return true
    }

    /// A request finished on `connectionID`.
    mutating func release(connectionID: Int) -> [Action] {
        guard loads[connectionID] != nil else { return [] }
        loads[connectionID]!.finished()
        var actions = serveWaiters()
        if let load = loads[connectionID], load.slot == nil, load.inFlight == 0 {
            actions.append(.close(connectionID: connectionID))  // drained after GOAWAY
        }
        return actions
    }

    /// A waiting request gave up (deadline or cancellation). Returns it if it was still waiting.
    mutating func removeWaiter(id: Int) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index).waiter
    }

    mutating func connectionReady(id: Int, capacity: Int, now: NIODeadline) -> [Action] {
        guard let slot = slots.firstIndex(where: { $0.phase == .connecting(id: id) }) else {
            return [.close(connectionID: id)]
        }
        slots[slot].phase = .ready(id: id, since: now)
        loads[id] = Load(capacity: capacity, inFlight: 0, slot: slot)
        return serveWaiters()
    }

    mutating func capacityChanged(id: Int, capacity: Int) -> [Action] {
        guard loads[id] != nil else { return [] }
        loads[id]!.capacity = capacity
        return serveWaiters()
    }

    /// GOAWAY: the connection finishes what it has; its slot connects again. At once if it answered
    /// requests (APNs sends GOAWAY to working connections, after a number of requests or for
    /// maintenance: no reason to wait, however short its life); with backoff if it answered none.
    mutating func goingAway(id: Int, now: NIODeadline) -> [Action] {
        guard let load = loads[id], let slot = load.slot else { return [] }
        loads[id]!.slot = nil
        loads[id]!.capacity = 0
        var actions = slotLost(slot, now: now, healthy: load.answered)
        if load.inFlight == 0 { actions.append(.close(connectionID: id)) }
        return actions
    }

    /// The channel of `id` closed (or never connected), with the error that ended it, if any.
    mutating func connectionClosed(id: Int, error: APNsClientError?, now: NIODeadline) -> [Action] {
        let load = loads.removeValue(forKey: id)
        var actions: [Action] = []
        if let slot = load?.slot {
            actions += slotLost(slot, now: now, worked: load?.answered ?? false)
        } else if let slot = slots.firstIndex(where: { $0.phase == .connecting(id: id) }) {
            slots[slot].failures += 1
            actions += slotLost(slot, now: now)
            // Nobody can be served now: tell the waiters why instead of letting them time out.
            if loads.values.allSatisfy({ $0.slot == nil }) {
                let reason = error ?? APNsClientError(.connectFailed, "could not connect", mayHaveReachedAPNs: false)
                while let (_, waiter) = waiters.popFirst() { actions.append(.fail(waiter, reason)) }
            }
        }
        return actions
    }

    /// A slot's backoff timer fired.
    mutating func reconnectDue(slot: Int) -> [Action] {
        guard slots[slot].phase == .backingOff, !shuttingDown else { return [] }
        return [connect(slot)]
    }

    /// Stop taking requests. Returns whether everything is already drained.
    mutating func shutdown() -> Bool {
        shuttingDown = true
        return inFlight == 0 && waiters.isEmpty
    }

    var isDrained: Bool { inFlight == 0 && waiters.isEmpty }

    // MARK: Internals

    private mutating func startIdleSlots() -> [Action] {
        var actions: [Action] = []
        for index in slots.indices where slots[index].phase == .idle {
            actions.append(connect(index))
        }
        return actions
    }

    private mutating func connect(_ slot: Int) -> Action {
        let id = nextID
        nextID += 1
        slots[slot].phase = .connecting(id: id)
        return .connect(slot: slot, id: id)
    }

    /// `healthy`: the connection ended through no fault of its own, whatever its age. `worked`: it
    /// answered requests before it was lost: one short backoff, not a growing one (a connection
    /// dropped now and then must not slow the pool down step by step).
    private mutating func slotLost(_ slot: Int, now: NIODeadline, healthy: Bool = false, worked: Bool = false)
        -> [Action]
    {
        if case .ready(_, let since) = slots[slot].phase {
            if healthy || now - since >= backoff.healthyAfter {
                slots[slot].failures = 0
            } else {
                slots[slot].failures = worked ? 1 : slots[slot].failures + 1
            }
        }
        guard !shuttingDown else {
            slots[slot].phase = .idle
            return []
        }
        slots[slot].phase = .backingOff
        return [.reconnect(slot: slot, after: delay(failures: slots[slot].failures))]
    }

    /// 0 after a healthy connection; otherwise "equal jitter": half the exponential step plus a random
    /// part of the other half, so two attempts are never closer than half a step.
    private func delay(failures: Int) -> TimeAmount {
        guard failures > 0 else { return .zero }
        let step = min(backoff.maximum.nanoseconds, backoff.base.nanoseconds << min(failures - 1, 30))
        return .nanoseconds(step / 2 + Int64.random(in: 0...max(0, step / 2)))
    }

    private func leastLoaded() -> Int? {
        var best: (id: Int, inFlight: Int)?
        for (id, load) in loads where load.slot != nil && load.inFlight < load.capacity {
            if best == nil || load.inFlight < best!.inFlight { best = (id, load.inFlight) }
        }
        return best?.id
    }

    private mutating func serveWaiters() -> [Action] {
        var actions: [Action] = []
        while !waiters.isEmpty, let id = leastLoaded() {
            loads[id]!.inFlight += 1
            actions.append(.dispatch(waiters.removeFirst().waiter, connectionID: id))
        }
        return actions
    }
}

/// A connection pool's state at one moment (a pool per credential; a client's figures add up its
/// pools'). For gauges: connections by state, streams in use against what the server allows, and
/// requests waiting for a stream.
public struct APNsPoolStatistics: Sendable, Equatable {
    /// Open and taking requests.
    public var readyConnections = 0
    /// Being opened (TCP, TLS, HTTP/2 settings).
    public var connectingConnections = 0
    /// After GOAWAY: finishing their requests, taking no new ones.
    public var drainingConnections = 0
    /// Requests on a stream (sent or being sent, not yet answered), draining connections included.
    public var streamsInUse = 0
    /// The sum of the ready connections' MAX_CONCURRENT_STREAMS.
    public var streamCapacity = 0
    /// Requests waiting for a free stream.
    public var waitingRequests = 0

    public init() {}

    static func + (lhs: Self, rhs: Self) -> Self {
        var sum = lhs
        sum.readyConnections += rhs.readyConnections
        sum.connectingConnections += rhs.connectingConnections
        sum.drainingConnections += rhs.drainingConnections
        sum.streamsInUse += rhs.streamsInUse
        sum.streamCapacity += rhs.streamCapacity
        sum.waitingRequests += rhs.waitingRequests
        return sum
    }
}
