import NIOCore

extension APNsConnectionPool {
    /// The bookkeeping of a connection pool, without I/O: which connection takes the next request,
    /// who waits, when to connect again, what to close. Kept behind the pool's lock; every method
    /// returns what to do, and the pool does it after unlocking.
    ///
    /// - `slots` connections are kept open; each slot reconnects on its own with exponential backoff
    ///   and jitter after a failure, at once after a healthy connection ended (up for `healthyAfter`, or
    ///   told to go away after answering requests).
    /// - A request goes to the serving connection with the fewest requests in flight that still has a
    ///   free stream; when none has, it waits in a bounded FIFO.
    /// - A connection that received GOAWAY drains: it takes nothing new and closes once its last
    ///   request is answered; its slot connects again meanwhile.
    /// - Shutting down, it takes no new request, serves those that wait, and says when all are done.
    ///
    /// Generic over what waits (`Waiter`) and what a connection is to its owner (`Connection`: the
    /// pool's `APNsConnection`; plain values in tests), so its rules are tested without a network.
    struct StateMachine<Waiter: Sendable, Connection: Sendable>: Sendable {
        enum SlotPhase {
            /// Nothing open and nothing planned (before the first request, or after a shutdown).
            case idle
            /// Connection `id` is being opened; `connection` once its channel exists.
            case connecting(id: Int, connection: Connection?)
            /// Connection `id` serves requests (its figures are in `open[id]`), up since `since`.
            case ready(id: Int, since: NIODeadline)
            /// Waiting to connect again; `timer` once the pool scheduled it. `epoch` tells this backoff
            /// from the slot's earlier ones: the pool schedules and registers a timer outside the lock,
            /// so a timer's registration or firing can come after the slot moved on to another backoff.
            case backingOff(epoch: Int, timer: Scheduled<Void>?)
        }

        struct Slot {
            var phase = SlotPhase.idle
            var failures = 0

            func isConnecting(_ id: Int) -> Bool {
                if case .connecting(id, _) = phase { return true }
                return false
            }
        }

        /// A connection whose server said SETTINGS: it serves a slot, or drains after GOAWAY.
        struct OpenConnection {
            enum Role: Equatable {
                case serving(slot: Int)
                /// GOAWAY: finishes what it has, takes nothing new; its slot connects again meanwhile.
                case draining
            }

            var role: Role
            var capacity: Int
            var inFlight = 0
            /// A request finished on it: the connection worked.
            var answered = false

            var isServing: Bool { role != .draining }

            /// A request on it finished. Returns whether it still serves (one dictionary access for
            /// the whole change, on every request's path).
            mutating func finished() -> Bool {
                inFlight -= 1
                answered = true
                return isServing
            }
        }

        enum Phase {
            case running
            /// No new request is taken; `drainWaiters` are told when nothing is in flight or waiting.
            case shuttingDown(drainWaiters: [EventLoopPromise<Void>])
        }

        enum Action {
            /// Open connection `id` for `slot` with credential `generation`'s key or certificate.
            case connect(slot: Int, id: Int, generation: Int)
            case reconnect(slot: Int, after: TimeAmount, epoch: Int)
            /// Send the request on connection `connectionID` (its stream is counted already).
            case dispatch(Waiter, connectionID: Int, Connection)
            case fail(Waiter, APNsClientError)
            case close(Connection)
            /// Everything accepted before the shutdown is done.
            case drained(EventLoopPromise<Void>)
        }

        private(set) var slots: [Slot]
        /// Connections whose server said SETTINGS (serving or draining), by id.
        private(set) var open: [Int: OpenConnection] = [:]
        /// The connection of each open one, apart from its figures: `leastLoaded` scans the figures
        /// on every request, and a struct without references scans without reference counting.
        var connections: [Int: Connection] = [:]
        /// The credential generation new connections open with (`rotate`), and each connection's,
        /// by id, from its connect to its close.
        var generation = 0
        var generationOf: [Int: Int] = [:]
        /// The pool's replacement timer runs (`rotate` started it; `replaceOne` ends it).
        var replacing = false
        private(set) var phase = Phase.running
        private var waiters = CircularBuffer<(id: Int, waiter: Waiter)>()
        /// Urgent requests waiting for a stream: served before any in `waiters`.
        private var urgentWaiters = CircularBuffer<(id: Int, waiter: Waiter)>()
        private let maximumWaiters: Int
        /// Streams a bulk (not urgent) request leaves free across the serving connections, for
        /// urgent ones; 0: none kept.
        private let reservedStreams: Int
        private let reconnect: Reconnect
        private var nextConnectionID = 1
        /// Numbers each backoff of any slot (`SlotPhase.backingOff`).
        private var nextBackoffEpoch = 0
        private var nextWaiterID = 0

        init(connections: Int, maximumWaiters: Int, reconnect: Reconnect, reservedStreams: Int = 0) {
            self.slots = Array(repeating: Slot(), count: max(1, connections))
            self.maximumWaiters = maximumWaiters
            self.reconnect = reconnect
            self.reservedStreams = max(0, reservedStreams)
        }

        var waiterCount: Int { waiters.count + urgentWaiters.count }

        var isShuttingDown: Bool {
            if case .shuttingDown = phase { return true }
            return false
        }

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
            for connection in open.values {
                if connection.isServing {
                    statistics.streamCapacity += connection.capacity
                } else {
                    statistics.drainingConnections += 1
                }
            }
            statistics.streamsInUse = inFlight
            statistics.waitingRequests = waiterCount
            return statistics
        }
        var inFlight: Int { open.values.reduce(0) { $0 + $1.inFlight } }

        /// A fresh id for a request that may wait (`acquire`, `giveUp`).
        mutating func makeWaiterID() -> Int {
            nextWaiterID += 1
            return nextWaiterID
        }

        // MARK: Requests

        /// What became of a request that wanted a stream.
        enum Acquired {
            /// It goes on connection `connectionID` (its stream is counted already).
            case dispatched(connectionID: Int, Connection)
            /// It waits in the queue; its owner gives it up at its deadline.
            case waiting
            /// Refused (shutting down, or the queue is full).
            case refused(APNsClientError)
        }

        /// A request wants a stream: the least loaded serving connection with a free one takes it, else
        /// it waits (`waiterID` names it there), else it is refused. Connections to open (the first
        /// request starts every idle slot) are appended to `connecting`. No allocation when a stream
        /// is free: this runs for every request.
        ///
        /// `urgent`: it goes before every bulk request waiting, and may take the streams a bulk one
        /// leaves free (`reservedStreams`); urgent ones wait in their own order.
        mutating func acquire(
            _ waiter: Waiter, waiterID: Int, urgent: Bool = false, connecting: inout [Action]
        ) -> Acquired {
            if isShuttingDown {
                return .refused(APNsClientError(.shutDown, "client is shutting down", mayHaveReachedAPNs: false))
            }
            startIdleSlots(into: &connecting)
            if urgentWaiters.isEmpty, urgent || waiters.isEmpty,
                let id = leastLoaded(keeping: urgent ? 0 : reservedStreams)
            {
                changeOpen(id) { $0.inFlight += 1 }
                return .dispatched(connectionID: id, connections[id]!)
            }
            if waiterCount < maximumWaiters {
                if urgent { urgentWaiters.append((waiterID, waiter)) } else { waiters.append((waiterID, waiter)) }
                return .waiting
            }
            return .refused(
                APNsClientError(
                    .queueFull, "every stream is busy and the wait queue is full", mayHaveReachedAPNs: false))
        }

        /// Opens every idle slot now, before any request (`APNsClient.connect()`): the first request
        /// then finds a connection ready. Nothing once shutting down; a slot connecting, ready or
        /// backing off is left as it is.
        mutating func openIdleSlots() -> [Action] {
            guard !isShuttingDown else { return [] }
            var actions: [Action] = []
            startIdleSlots(into: &actions)
            return actions
        }

        /// A request finished on `connectionID`: its stream serves the first waiter, a draining
        /// connection closes after its last, a shutdown ends after the last of all. Nothing to do (an
        /// empty array, no allocation) in the common case.
        mutating func release(connectionID id: Int) -> [Action] {
            guard let serving = changeOpen(id, { $0.finished() }) else { return [] }
            if serving, waiters.isEmpty, urgentWaiters.isEmpty, case .running = phase { return [] }
            var actions = serveWaiters()
            if let connection = open[id], !connection.isServing, connection.inFlight == 0 {
                actions.append(.close(connections[id]!))  // drained after GOAWAY
            }
            drainedIfDone(into: &actions)
            return actions
        }

        /// Waiting requests give up (their deadline passed, or their caller cancelled): those still
        /// waiting fail with `error`.
        mutating func giveUp(waiterIDs ids: Set<Int>, _ error: APNsClientError) -> [Action] {
            var actions: [Action] = []
            Self.remove(ids, from: &urgentWaiters, failing: error, into: &actions)
            Self.remove(ids, from: &waiters, failing: error, into: &actions)
            guard !actions.isEmpty else { return [] }
            drainedIfDone(into: &actions)
            return actions
        }

        private static func remove(
            _ ids: Set<Int>, from queue: inout CircularBuffer<(id: Int, waiter: Waiter)>,
            failing error: APNsClientError,
            into actions: inout [Action]
        ) {
            guard queue.contains(where: { ids.contains($0.id) }) else { return }
            var kept = CircularBuffer<(id: Int, waiter: Waiter)>(initialCapacity: queue.count)
            for entry in queue {
                if ids.contains(entry.id) { actions.append(.fail(entry.waiter, error)) } else { kept.append(entry) }
            }
            queue = kept
        }

        // MARK: Connections

        /// The channel of connection `id` exists (before TLS and SETTINGS). A connection that is no
        /// longer wanted is closed.
        mutating func connectionCreated(id: Int, connection: Connection) -> [Action] {
            guard let slot = slots.firstIndex(where: { $0.isConnecting(id) }) else { return [.close(connection)] }
            slots[slot].phase = .connecting(id: id, connection: connection)
            return []
        }

        mutating func connectionReady(id: Int, capacity: Int, now: NIODeadline) -> [Action] {
            guard let slot = slots.firstIndex(where: { $0.isConnecting(id) }),
                case .connecting(_, let connection?) = slots[slot].phase
            else { return [] }
            slots[slot].phase = .ready(id: id, since: now)
            open[id] = OpenConnection(role: .serving(slot: slot), capacity: capacity)
            connections[id] = connection
            return serveWaiters()
        }

        mutating func capacityChanged(id: Int, capacity: Int) -> [Action] {
            guard changeOpen(id, { $0.capacity = capacity }) != nil else { return [] }
            return serveWaiters()
        }

        /// The channel of `id` closed (or never connected), with the error that ended it, if any.
        mutating func connectionClosed(id: Int, error: APNsClientError?, now: NIODeadline) -> [Action] {
            var actions: [Action] = []
            generationOf[id] = nil
            if let connection = open.removeValue(forKey: id) {
                connections[id] = nil
                if case .serving(let slot) = connection.role {
                    actions += slotLost(slot, now: now, worked: connection.answered)
                }
            } else if let slot = slots.firstIndex(where: { $0.isConnecting(id) }) {
                slots[slot].failures += 1
                actions += slotLost(slot, now: now)
                // Nobody can be served now: tell the waiters why instead of letting them time out.
                if !open.values.contains(where: \.isServing) {
                    let reason =
                        error ?? APNsClientError(.connectFailed, "could not connect", mayHaveReachedAPNs: false)
                    while let (_, waiter) = urgentWaiters.popFirst() { actions.append(.fail(waiter, reason)) }
                    while let (_, waiter) = waiters.popFirst() { actions.append(.fail(waiter, reason)) }
                }
            }
            drainedIfDone(into: &actions)
            return actions
        }

        /// The pool scheduled the reconnect of `slot` for backoff `epoch` (`Action.reconnect`). A timer
        /// that comes after the slot moved on (its timer fired, or it backs off again) is cancelled.
        mutating func reconnectScheduled(slot: Int, epoch: Int, timer: Scheduled<Void>) -> Scheduled<Void>? {
            guard case .backingOff(epoch, nil) = slots[slot].phase, !isShuttingDown else { return timer }
            slots[slot].phase = .backingOff(epoch: epoch, timer: timer)
            return nil
        }

        /// The timer of a slot's backoff `epoch` fired: nothing, if the slot has moved on since.
        mutating func reconnectDue(slot: Int, epoch: Int) -> [Action] {
            guard case .backingOff(epoch, _) = slots[slot].phase, !isShuttingDown else { return [] }
            return [connect(slot)]
        }

        // MARK: Shutdown

        /// Stop taking requests; `drained` is completed (through `Action.drained`) once every accepted
        /// request is done, at once if none is left.
        mutating func shutdown(drained: EventLoopPromise<Void>) -> [Action] {
            switch phase {
            case .running: phase = .shuttingDown(drainWaiters: [drained])
            case .shuttingDown(let waiters): phase = .shuttingDown(drainWaiters: waiters + [drained])
            }
            var actions: [Action] = []
            drainedIfDone(into: &actions)
            return actions
        }

        var isDrained: Bool { inFlight == 0 && waiterCount == 0 }

        /// After the drain: every connection to close (each sends GOAWAY first) and every reconnect
        /// timer to cancel. The slots are idle afterwards.
        mutating func closeAll() -> (connections: [Connection], timers: [Scheduled<Void>]) {
            var connections = Array(self.connections.values)
            var timers: [Scheduled<Void>] = []
            for index in slots.indices {
                switch slots[index].phase {
                case .connecting(_, let connection?): connections.append(connection)
                case .backingOff(_, let timer?): timers.append(timer)
                case .connecting, .backingOff, .idle, .ready: break
                }
                slots[index].phase = .idle
            }
            open = [:]
            self.connections = [:]
            generationOf = [:]
            return (connections, timers)
        }

        // MARK: Internals

        private mutating func drainedIfDone(into actions: inout [Action]) {
            guard case .shuttingDown(let promises) = phase, !promises.isEmpty, isDrained else { return }
            phase = .shuttingDown(drainWaiters: [])
            for promise in promises { actions.append(.drained(promise)) }
        }

        private mutating func startIdleSlots(into actions: inout [Action]) {
            for index in slots.indices {
                if case .idle = slots[index].phase { actions.append(connect(index)) }
            }
        }

        private mutating func connect(_ slot: Int) -> Action {
            let id = nextConnectionID
            nextConnectionID += 1
            slots[slot].phase = .connecting(id: id, connection: nil)
            generationOf[id] = generation
            return .connect(slot: slot, id: id, generation: generation)
        }

        /// `healthy`: the connection ended through no fault of its own, whatever its age. `worked`: it
        /// answered requests before it was lost: one short backoff, not a growing one (a connection
        /// dropped now and then must not slow the pool down step by step).
        mutating func slotLost(
            _ slot: Int, now: NIODeadline, healthy: Bool = false, worked: Bool = false, retired: Bool = false
        ) -> [Action] {
            if retired {
                slots[slot].failures += 1
            } else if case .ready(_, let since) = slots[slot].phase {
                if healthy || now - since >= reconnect.healthyAfter {
                    slots[slot].failures = 0
                } else {
                    slots[slot].failures = worked ? 1 : slots[slot].failures + 1
                }
            }
            guard !isShuttingDown else {
                slots[slot].phase = .idle
                return []
            }
            nextBackoffEpoch += 1
            slots[slot].phase = .backingOff(epoch: nextBackoffEpoch, timer: nil)
            return [
                .reconnect(slot: slot, after: reconnect.delay(failures: slots[slot].failures), epoch: nextBackoffEpoch)
            ]
        }

        /// Changes an open connection's figures; `nil` when `id` is not open. Copied out and stored
        /// back rather than changed in place (`open[id]!.inFlight += 1`): changing a dictionary's
        /// value in place goes through an accessor that allocates its frame, and this runs twice for
        /// every request (acquire and release).
        @discardableResult
        mutating func changeOpen<R>(_ id: Int, _ change: (inout OpenConnection) -> R) -> R? {
            guard var connection = open[id] else { return nil }
            let result = change(&connection)
            open[id] = connection
            return result
        }

        /// The least loaded serving connection with a free stream, if more than `reserve` streams are
        /// free across the serving connections. The reserve is at most half of their streams: a
        /// server that allows few streams still serves bulk requests.
        private func leastLoaded(keeping reserve: Int) -> Int? {
            var best: (id: Int, inFlight: Int)?
            var free = 0
            var capacity = 0
            for (id, connection) in open where connection.isServing {
                capacity += connection.capacity
                guard connection.inFlight < connection.capacity else { continue }
                free += connection.capacity - connection.inFlight
                if best == nil || connection.inFlight < best!.inFlight { best = (id, connection.inFlight) }
            }
            return reserve == 0 || free > min(reserve, capacity / 2) ? best?.id : nil
        }

        /// Free streams to the waiters: every urgent one first, then bulk ones while more than the
        /// reserve is free.
        private mutating func serveWaiters() -> [Action] {
            var actions: [Action] = []
            while !urgentWaiters.isEmpty, let id = leastLoaded(keeping: 0) {
                changeOpen(id) { $0.inFlight += 1 }
                actions.append(.dispatch(urgentWaiters.removeFirst().waiter, connectionID: id, connections[id]!))
            }
            while !waiters.isEmpty, let id = leastLoaded(keeping: reservedStreams) {
                changeOpen(id) { $0.inFlight += 1 }
                actions.append(.dispatch(waiters.removeFirst().waiter, connectionID: id, connections[id]!))
            }
            return actions
        }
    }
}
