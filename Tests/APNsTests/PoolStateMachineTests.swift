import NIOCore
import NIOEmbedded
import Testing

@testable import APNs

@Suite("Connection pool decisions")
struct PoolStateMachineTests {
    typealias Machine = APNsConnectionPool.StateMachine<Int, Int>
    let backoff = Machine.Reconnect(base: .milliseconds(100), maximum: .seconds(10), healthyAfter: .seconds(10))

    private func connectIDs(_ actions: [Machine.Action]) -> [Int] {
        actions.compactMap { if case .connect(_, let id, _) = $0 { return id } else { return nil } }
    }

    private func dispatched(_ actions: [Machine.Action]) -> [(Int, Int)] {
        actions.compactMap { if case .dispatch(let w, let id, _) = $0 { return (w, id) } else { return nil } }
    }

    /// The channel of `id` exists (the test's connection is its id), and its server said SETTINGS.
    private func ready(_ machine: inout Machine, id: Int, capacity: Int, now: NIODeadline) -> [Machine.Action] {
        #expect(machine.connectionCreated(id: id, connection: id).isEmpty)
        return machine.connectionReady(id: id, capacity: capacity, now: now)
    }

    @Test("first request opens every slot, waits, and goes to the least loaded ready connection")
    func leastLoaded() {
        var machine = Machine(connections: 2, maximumWaiters: 10, reconnect: backoff)
        let ids = connectIDs(machine.acquire(1, waiterID: 1))
        #expect(ids.count == 2)
        let now = NIODeadline.now()
        #expect(dispatched(ready(&machine, id: ids[0], capacity: 2, now: now)).map(\.0) == [1])
        _ = ready(&machine, id: ids[1], capacity: 2, now: now)
        #expect(dispatched(machine.acquire(2, waiterID: 2)).map(\.1) == [ids[1]])
        #expect(dispatched(machine.acquire(3, waiterID: 3)).count == 1)
        #expect(dispatched(machine.acquire(4, waiterID: 4)).count == 1)
        // 4 in flight on 2 x 2 streams: the next waits, and is served on release.
        #expect(dispatched(machine.acquire(5, waiterID: 5)).isEmpty)
        #expect(machine.waiterCount == 1)
        #expect(dispatched(machine.release(connectionID: ids[0])).map { $0.0 } == [5])
    }

    @Test("open before any request starts every idle slot once; the first request then goes straight out")
    func openBeforeRequests() {
        var machine = Machine(connections: 2, maximumWaiters: 10, reconnect: backoff)
        let ids = connectIDs(machine.openIdleSlots())
        #expect(ids.count == 2)
        #expect(machine.openIdleSlots().isEmpty, "slots already connecting are left as they are")
        let now = NIODeadline.now()
        _ = ready(&machine, id: ids[0], capacity: 2, now: now)
        let first = machine.acquire(1, waiterID: 1)
        #expect(connectIDs(first).isEmpty, "the first request opens nothing more")
        #expect(dispatched(first).map(\.1) == [ids[0]])
        var closing = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        let drained = EmbeddedEventLoop().makePromise(of: Void.self)
        _ = closing.shutdown(drained: drained)
        #expect(closing.openIdleSlots().isEmpty, "nothing opens once shutting down")
        drained.succeed()
    }

    @Test("a stream given back costs nothing to do unless a waiter, a drain or a shutdown is due")
    func releaseQuietly() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        let id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        _ = ready(&machine, id: id, capacity: 2, now: .now())
        #expect(dispatched(machine.acquire(2, waiterID: 2)).map(\.1) == [id])
        #expect(machine.statistics.streamsInUse == 2)
        #expect(machine.release(connectionID: id).isEmpty)
        #expect(machine.statistics.streamsInUse == 1)
        // Full, and one waits: the release serves it.
        #expect(dispatched(machine.acquire(3, waiterID: 3)).count == 1)
        #expect(dispatched(machine.acquire(9, waiterID: 9)).isEmpty)
        #expect(dispatched(machine.release(connectionID: id)).map(\.0) == [9])
        #expect(machine.statistics.streamsInUse == 2)
        // Draining after GOAWAY: the last release closes the connection.
        _ = machine.goingAway(id: id, now: .now())
        #expect(machine.release(connectionID: id).isEmpty)
        let last = machine.release(connectionID: id)
        #expect(last.contains { if case .close(id) = $0 { true } else { false } })
    }

    @Test("shutdown refuses new requests, serves the waiting ones, and says drained after the last answer")
    func shutdownDrains() throws {
        let loop = EmbeddedEventLoop()
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        let id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        _ = ready(&machine, id: id, capacity: 1, now: .now())
        #expect(dispatched(machine.acquire(2, waiterID: 2)).isEmpty)
        let drained = loop.makePromise(of: Void.self)
        #expect(machine.shutdown(drained: drained).isEmpty)
        let refused = machine.acquire(3, waiterID: 3)
        #expect(refused.contains { if case .fail(3, let e) = $0 { e.code == .shutDown } else { false } })
        #expect(dispatched(machine.release(connectionID: id)).map(\.0) == [2])
        let last = machine.release(connectionID: id)
        #expect(last.contains { if case .drained = $0 { true } else { false } })
        drained.succeed()
        let (connections, timers) = machine.closeAll()
        #expect(connections == [id])
        #expect(timers.isEmpty)
        #expect(machine.statistics == APNsPoolStatistics())
    }

    @Test("requests that give up waiting fail with the reason given; the others keep their place")
    func giveUp() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        _ = machine.acquire(1, waiterID: 1)
        _ = machine.acquire(2, waiterID: 2)
        _ = machine.acquire(3, waiterID: 3)
        let error = APNsClientError(.deadlineExceeded, "test", mayHaveReachedAPNs: false)
        let failed = machine.giveUp(waiterIDs: [1, 3, 7], error).compactMap { action -> Int? in
            if case .fail(let waiter, let reason) = action, reason == error { return waiter } else { return nil }
        }
        #expect(failed == [1, 3])
        #expect(machine.waiterCount == 1)
        #expect(machine.giveUp(waiterIDs: [1], error).isEmpty)
    }

    @Test("the wait queue is bounded")
    func boundedQueue() {
        var machine = Machine(connections: 1, maximumWaiters: 2, reconnect: backoff)
        _ = machine.acquire(1, waiterID: 1)
        _ = machine.acquire(2, waiterID: 2)
        let actions = machine.acquire(3, waiterID: 3)
        guard case .fail(3, let error) = actions.last else {
            Issue.record("third waiter not refused")
            return
        }
        #expect(error.code == .queueFull)
        #expect(!error.mayHaveReachedAPNs)
    }

    @Test("failed connects back off exponentially with jitter, never zero; a healthy connection reconnects at once")
    func backoffGrows() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        var id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        var delays: [TimeAmount] = []
        for _ in 0..<8 {
            let actions = machine.connectionClosed(id: id, error: nil, now: .now())
            guard case .reconnect(let slot, let delay, let epoch) = actions.first else {
                Issue.record("no reconnect")
                return
            }
            delays.append(delay)
            id = connectIDs(machine.reconnectDue(slot: slot, epoch: epoch))[0]
        }
        #expect(delays.allSatisfy { $0 >= .milliseconds(50) })
        #expect(delays[0] <= .milliseconds(100))
        #expect(delays[4] >= .milliseconds(800))
        #expect(delays.allSatisfy { $0 <= .seconds(10) })
        // A connection that was up for longer than `healthyAfter` is replaced without delay.
        let start = NIODeadline.now()
        _ = ready(&machine, id: id, capacity: 10, now: start)
        let actions = machine.connectionClosed(id: id, error: nil, now: start + .seconds(11))
        guard case .reconnect(_, let delay, _) = actions.first else {
            Issue.record("no reconnect")
            return
        }
        #expect(delay == .zero)
    }

    // APNs (and the simulator's fault) can send GOAWAY after a fixed number of requests. A
    // connection that answered requests and was told to go away did nothing wrong, however short its
    // life: counted as a failure, each replacement waited longer, and with GOAWAY every 100 requests
    // a worker's throughput fell from about 200 to 11 events/s over 2,000 events.
    @Test("a connection told to go away after answering requests is replaced at once, however short its life")
    func goAwayAfterAnswersIsNoFailure() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        var id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        var delays: [TimeAmount] = []
        for round in 0..<6 {
            let now = NIODeadline.now()
            _ = ready(&machine, id: id, capacity: 10, now: now)
            if round > 0 { _ = machine.acquire(round, waiterID: round) }
            _ = machine.release(connectionID: id)
            let actions = machine.goingAway(id: id, now: now + .milliseconds(500))
            guard
                let (delay, epoch) = actions.lazy.compactMap({ action -> (TimeAmount, Int)? in
                    if case .reconnect(_, let after, let epoch) = action { return (after, epoch) } else { return nil }
                }).first
            else {
                Issue.record("no reconnect")
                return
            }
            delays.append(delay)
            id = connectIDs(machine.reconnectDue(slot: 0, epoch: epoch))[0]
        }
        #expect(delays == Array(repeating: .zero, count: 6))

        // One that answered nothing before its GOAWAY still backs off, as a failed connect does.
        let now = NIODeadline.now()
        _ = ready(&machine, id: id, capacity: 10, now: now)
        let actions = machine.goingAway(id: id, now: now + .milliseconds(500))
        #expect(
            actions.contains { if case .reconnect(_, let after, _) = $0 { return after > .zero } else { return false } }
        )
    }

    @Test("a connection dropped after answering requests waits one short backoff, never a growing one")
    func dropAfterAnswersBacksOffOnce() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        var id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        for round in 0..<6 {
            let now = NIODeadline.now()
            _ = ready(&machine, id: id, capacity: 10, now: now)
            if round > 0 { _ = machine.acquire(round, waiterID: round) }
            _ = machine.release(connectionID: id)
            let actions = machine.connectionClosed(id: id, error: nil, now: now + .milliseconds(500))
            guard case .reconnect(let slot, let delay, let epoch) = actions.first else {
                Issue.record("no reconnect")
                return
            }
            #expect(delay > .zero && delay <= backoff.base, "round \(round): \(delay)")
            id = connectIDs(machine.reconnectDue(slot: slot, epoch: epoch))[0]
        }
    }

    @Test("a failed connect with nothing ready fails the waiters with its error instead of letting them hang")
    func waitersToldWhy() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        let id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        let error = APNsClientError(.serverCertificateRejected, "test", mayHaveReachedAPNs: false)
        let actions = machine.connectionClosed(id: id, error: error, now: .now())
        #expect(actions.contains { if case .fail(1, let e) = $0 { return e == error } else { return false } })
    }

    @Test("GOAWAY: the connection drains, takes nothing new, closes when empty; its slot reconnects")
    func goAwayDrains() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        let id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        _ = ready(&machine, id: id, capacity: 10, now: .now())
        let actions = machine.goingAway(id: id, now: .now())
        #expect(actions.contains { if case .reconnect = $0 { return true } else { return false } })
        #expect(dispatched(machine.acquire(2, waiterID: 2)).isEmpty)
        #expect(
            machine.release(connectionID: id).contains { if case .close(id) = $0 { return true } else { return false } }
        )
    }

    // After TooManyProviderTokenUpdates a connection is unusable for a while, and after
    // UnrelatedKeyIdInToken it will never take the new key: it is retired, and its replacement opens
    // after a backoff step, however long it was up, so that a pod meeting this again and again does
    // not open and close connections in a loop.
    @Test("a retired connection drains and its slot reconnects after a growing backoff, even after hours up")
    func retiredConnectionBacksOff() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        var id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        let start = NIODeadline.now()
        var delays: [TimeAmount] = []
        for round in 0..<3 {
            _ = ready(&machine, id: id, capacity: 10, now: start)
            if round > 0 { _ = machine.acquire(round + 1, waiterID: round + 1) }
            _ = machine.release(connectionID: id)
            let actions = machine.retire(id: id, now: start + .hours(2))
            #expect(actions.contains { if case .close(id) = $0 { true } else { false } }, "idle: closed at once")
            guard
                case .reconnect(let slot, let delay, let epoch)? = actions.first(where: {
                    if case .reconnect = $0 { true } else { false }
                })
            else {
                Issue.record("no reconnect in round \(round)")
                return
            }
            delays.append(delay)
            id = connectIDs(machine.reconnectDue(slot: slot, epoch: epoch))[0]
        }
        #expect(delays.allSatisfy { $0 > .zero }, "\(delays)")
        #expect(delays[2] > delays[0], "the backoff grows while retirements go on: \(delays)")
    }

    // The pool registers a reconnect's timer after scheduling it, outside the lock. A timer that
    // fired before its registration, whose connect then failed at once, left the slot backing off
    // again; the late registration of the spent timer took the slot's place, and the new timer's
    // registration was refused and cancelled: the slot never reconnected.
    @Test("a reconnect timer registered after it fired and its slot backed off again is refused; the new one is kept")
    func lateTimerRegistration() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        let id = connectIDs(machine.acquire(1, waiterID: 1))[0]
        let start = NIODeadline.now()
        _ = ready(&machine, id: id, capacity: 10, now: start)
        _ = machine.release(connectionID: id)
        let loop = EmbeddedEventLoop()
        let first = machine.goingAway(id: id, now: start + .seconds(11))
        guard
            case .reconnect(let slot, _, let spentEpoch)? = first.first(where: {
                if case .reconnect = $0 { true } else { false }
            })
        else {
            Issue.record("no reconnect: \(first)")
            return
        }
        // Its timer fires at once, before the pool has registered it: the slot connects, and fails.
        let next = connectIDs(machine.reconnectDue(slot: slot, epoch: spentEpoch))[0]
        let second = machine.connectionClosed(id: next, error: nil, now: start + .seconds(12))
        guard case .reconnect(slot, _, let liveEpoch)? = second.first else {
            Issue.record("no second reconnect: \(second)")
            return
        }
        let spent = loop.scheduleTask(in: .hours(1)) {}
        let fresh = loop.scheduleTask(in: .hours(1)) {}
        #expect(
            machine.reconnectScheduled(slot: slot, epoch: spentEpoch, timer: spent) != nil,
            "the spent timer took the slot")
        #expect(
            machine.reconnectScheduled(slot: slot, epoch: liveEpoch, timer: fresh) == nil,
            "the live timer was cancelled")
        #expect(machine.reconnectDue(slot: slot, epoch: spentEpoch).isEmpty, "a spent timer firing again: nothing")
        #expect(connectIDs(machine.reconnectDue(slot: slot, epoch: liveEpoch)).count == 1, "the live one connects")
        spent.cancel()
        fresh.cancel()
    }
}

@Suite("Answers and failures to outcomes")
struct OutcomeTests {
    @Test(
        "the outcome table: answers and failures to outcomes",
        arguments: [
            (200, nil, APNsOutcome.delivered),
            (410, "Unregistered", .unregistered(timestampMilliseconds: 1_700_000_000_000)),
            (410, "ExpiredToken", .unregistered(timestampMilliseconds: 1_700_000_000_000)),
            (400, "BadDeviceToken", .rejected(.badDeviceToken)),
            (400, "DeviceTokenNotForTopic", .rejected(.deviceTokenNotForTopic)),
            (405, "MethodNotAllowed", .rejected(.methodNotAllowed)),
            (413, "PayloadTooLarge", .rejected(.payloadTooLarge)),
            (403, "ExpiredProviderToken", .refreshToken),
            (403, "InvalidProviderToken", .credentialsBroken("InvalidProviderToken")),
            (403, "BadCertificate", .credentialsBroken("BadCertificate")),
            (403, "BadCertificateEnvironment", .credentialsBroken("BadCertificateEnvironment")),
            (403, "Forbidden", .credentialsBroken("Forbidden")),
            (403, "MissingProviderToken", .credentialsBroken("MissingProviderToken")),
            // Apple's key binding: a token from a key unrelated to the connection's first needs a new
            // connection (the pool retires this one); a key scoped to the other environment is broken
            // credentials, in both spellings seen.
            (403, "UnrelatedKeyIdInToken", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
            (403, "BadEnvironmentKeyIdInToken", .credentialsBroken("BadEnvironmentKeyIdInToken")),
            (403, "BadEnvironmentKeyInToken", .credentialsBroken("BadEnvironmentKeyInToken")),
            (429, "TooManyRequests", .retryLater(perDeviceToken: true, mayHaveReachedAPNs: true)),
            (429, "TooManyProviderTokenUpdates", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
            (500, "InternalServerError", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
            (503, "ServiceUnavailable", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
            (503, "Shutdown", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
        ] as [(Int, String?, APNsOutcome)])
    func table(status: Int, reason: String?, outcome: APNsOutcome) {
        let response = APNsResponse(
            status: status, reason: reason.map(APNsReason.init),
            timestampMilliseconds: status == 410 ? 1_700_000_000_000 : nil)
        #expect(APNsOutcome.classify(response) == outcome)
    }

    @Test("transport failures are retryable and say whether the request may have reached APNs")
    func failures() {
        let notSent = APNsClientError(.goAway, "x", mayHaveReachedAPNs: false, goAwayReason: "Shutdown")
        #expect(APNsOutcome.classify(notSent) == .retryLater(perDeviceToken: false, mayHaveReachedAPNs: false))
        let timeout = APNsClientError(.deadlineExceeded, "x", mayHaveReachedAPNs: true)
        #expect(APNsOutcome.classify(timeout) == .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true))
        let badCA = APNsClientError(.serverCertificateRejected, "x", mayHaveReachedAPNs: false)
        #expect(APNsOutcome.classify(badCA) == .credentialsBroken("serverCertificateRejected"))
        let rule = APNsNotificationError(.payloadTooLarge, field: .payload, "x")
        #expect(APNsOutcome.classify(rule) == .rejected(.payloadTooLarge))
    }

    @Test("reasons round-trip; unknown ones are kept; error bodies parse")
    func reasons() {
        #expect(APNsReason("BadDeviceToken") == .badDeviceToken)
        #expect(APNsReason("BadDeviceToken").rawValue == "BadDeviceToken")
        #expect(APNsReason("SomethingNew") == .unknown("SomethingNew"))
        let parsed = APNsResponse.parseBody(Array(#"{"reason":"Unregistered","timestamp":1700000000000}"#.utf8))
        #expect(parsed.reason == .unregistered)
        #expect(parsed.timestamp == 1_700_000_000_000)
        #expect(APNsResponse.parseBody(Array("<html>".utf8)).reason == nil)
    }
}
