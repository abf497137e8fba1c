import NIOCore

extension APNsConnectionPool.StateMachine {
    /// Why a serving connection stops taking requests, and so how soon its slot connects again.
    enum DrainCause {
        /// GOAWAY. At once if it answered requests (APNs sends GOAWAY to working connections, after a
        /// number of requests or for maintenance: no reason to wait, however short its life); with
        /// backoff if it answered none.
        case goingAway
        /// APNs will not take its provider token any more (TooManyProviderTokenUpdates,
        /// UnrelatedKeyIdInToken): a backoff step however long it was up, so that a pod that keeps
        /// meeting this does not open and close connections in a loop.
        case retired
        /// It was opened with a credential that has since been replaced (`rotate`): at once, with
        /// the current one.
        case replaced
    }

    /// Connection `id` finishes what it has and takes nothing new; its slot connects again (after
    /// `cause`'s wait). Nothing if it is not serving.
    mutating func drain(id: Int, cause: DrainCause, now: NIODeadline) -> [Action] {
        guard let connection = open[id], case .serving(let slot) = connection.role else { return [] }
        changeOpen(id) {
            $0.role = .draining
            $0.capacity = 0
        }
        var actions: [Action]
        switch cause {
        case .goingAway: actions = slotLost(slot, now: now, healthy: connection.answered)
        case .retired: actions = slotLost(slot, now: now, retired: true)
        case .replaced: actions = slotLost(slot, now: now, healthy: true)
        }
        if connection.inFlight == 0 { actions.append(.close(connections[id]!)) }
        return actions
    }

    /// GOAWAY from the server.
    mutating func goingAway(id: Int, now: NIODeadline) -> [Action] {
        drain(id: id, cause: .goingAway, now: now)
    }

    /// APNs will not take connection `id`'s provider token any more.
    mutating func retire(id: Int, now: NIODeadline) -> [Action] {
        drain(id: id, cause: .retired, now: now)
    }

    // MARK: Credential rotation

    /// New connections open with credential `generation` from now on (its key or certificate was
    /// reloaded). Those of earlier generations are not closed here: the pool replaces them one at a
    /// time (`replaceOne`), never all at once. Returns how many are left to replace.
    mutating func rotate(to generation: Int) -> Int {
        self.generation = max(self.generation, generation)
        return earlierGenerationConnections
    }

    /// Whether the pool must start its replacement timer: connections are left to replace and none
    /// runs yet (`replaceOne` ends it once none is left).
    mutating func beginReplacing() -> Bool {
        guard !replacing, earlierGenerationConnections > 0 else { return false }
        replacing = true
        return true
    }

    /// Connections, serving or being opened, of a generation before the current one.
    var earlierGenerationConnections: Int {
        var count = 0
        for slot in slots {
            switch slot.phase {
            case .connecting(let id, _), .ready(let id, _):
                if let made = generationOf[id], made < generation { count += 1 }
            case .idle, .backingOff: break
            }
        }
        return count
    }

    /// Whether connection `id` was opened with a credential that has since been replaced.
    func isEarlierGeneration(_ id: Int) -> Bool {
        generationOf[id].map { $0 < generation } ?? false
    }

    /// Replaces one serving connection of an earlier generation, the least loaded (it finishes
    /// soonest): it drains, and its slot connects at once with the current credential. One being
    /// opened is left until it serves (it carries no request yet). Returns the actions and how many
    /// are left to replace after this one; at none the replacement ends (the pool's timer stops).
    mutating func replaceOne(now: NIODeadline) -> (actions: [Action], replaced: Bool, left: Int) {
        var step: (actions: [Action], replaced: Bool, left: Int) = ([], false, 0)
        if !isShuttingDown {
            var least: (id: Int, inFlight: Int)?
            for (id, connection) in open where connection.isServing && isEarlierGeneration(id) {
                if least == nil || connection.inFlight < least!.inFlight { least = (id, connection.inFlight) }
            }
            if let least { step = (drain(id: least.id, cause: .replaced, now: now), true, 0) }
            step.left = earlierGenerationConnections
        }
        if step.left == 0 { replacing = false }
        return step
    }
}
