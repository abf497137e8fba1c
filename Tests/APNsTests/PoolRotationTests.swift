import NIOCore
import NIOEmbedded
import Testing

@testable import APNs

/// A credential reloaded under a pool with connections open: the pool's rules, driven without a
/// network. New connections take the new credential; those open keep theirs (APNs binds a connection
/// to its first key) and are replaced one per step, never all at once.
@Suite("Connection pool: credential rotation")
struct PoolRotationTests {
    typealias Machine = APNsConnectionPool.StateMachine<Int, Int>
    let backoff = Machine.Reconnect(base: .milliseconds(100), maximum: .seconds(10), healthyAfter: .seconds(10))

    private func connects(_ actions: [Machine.Action]) -> [(id: Int, generation: Int)] {
        actions.compactMap { if case .connect(_, let id, let generation) = $0 { (id, generation) } else { nil } }
    }

    private func closes(_ actions: [Machine.Action]) -> [Int] {
        actions.compactMap { if case .close(let id) = $0 { id } else { nil } }
    }

    private func reconnects(_ actions: [Machine.Action]) -> [(slot: Int, after: TimeAmount, epoch: Int)] {
        actions.compactMap {
            if case .reconnect(let slot, let after, let epoch) = $0 { (slot, after, epoch) } else { nil }
        }
    }

    /// `count` connections ready with `capacity` streams each; returns their ids.
    private func pool(_ machine: inout Machine, count: Int, capacity: Int = 10) -> [Int] {
        let ids = connects(machine.openIdleSlots()).map(\.id)
        #expect(ids.count == count)
        for id in ids {
            _ = machine.connectionCreated(id: id, connection: id)
            _ = machine.connectionReady(id: id, capacity: capacity, now: .now())
        }
        return ids
    }

    private func serving(_ machine: Machine) -> Set<Int> {
        Set(machine.open.filter { $0.value.isServing }.keys)
    }

    @Test(
        "after a rotation the connections of the credential before go one per step, least loaded first, each slot reconnecting at once with the new one"
    )
    func replacedOneAtATime() {
        var machine = Machine(connections: 3, maximumWaiters: 10, reconnect: backoff)
        let ids = pool(&machine, count: 3)
        // One request in flight on each (the least loaded takes each), then the second's answered.
        var connecting: [Machine.Action] = []
        for waiter in 1...3 { _ = machine.acquire(waiter, waiterID: waiter, connecting: &connecting) }
        #expect(ids.allSatisfy { machine.open[$0]?.inFlight == 1 })
        #expect(machine.release(connectionID: ids[1]).isEmpty)
        let idle = ids[1]

        #expect(machine.rotate(to: 1) == 3, "three connections to replace")
        #expect(serving(machine) == Set(ids), "a rotation closes nothing by itself")

        let first = machine.replaceOne(now: .now())
        #expect(first.replaced && first.left == 2)
        #expect(closes(first.actions) == [idle], "the idle one first, closed at once (nothing in flight)")
        #expect(serving(machine) == Set(ids).subtracting([idle]), "one connection replaced, not more")
        let reconnect = try! #require(reconnects(first.actions).first)
        #expect(reconnect.after == .zero, "its slot connects again at once")
        let fresh = connects(machine.reconnectDue(slot: reconnect.slot, epoch: reconnect.epoch))
        #expect(fresh.map(\.generation) == [1], "with the new credential")
        // The idle one's channel closes, as the pool's close makes it.
        _ = machine.connectionClosed(id: idle, error: nil, now: .now())
        _ = machine.connectionCreated(id: fresh[0].id, connection: fresh[0].id)
        _ = machine.connectionReady(id: fresh[0].id, capacity: 10, now: .now())
        #expect(machine.earlierGenerationConnections == 2)

        // The next one has a request in flight: it drains, closing after its last answer.
        let second = machine.replaceOne(now: .now())
        #expect(second.replaced && second.left == 1 && closes(second.actions).isEmpty)
        let drained = try! #require(machine.open.first { !$0.value.isServing }.map(\.key))
        #expect(closes(machine.release(connectionID: drained)) == [drained])
        let third = machine.replaceOne(now: .now())
        #expect(third.replaced && third.left == 0)
        #expect(machine.replaceOne(now: .now()).replaced == false, "nothing left")
    }

    @Test("a connection still being opened at the rotation is replaced once it serves, not before")
    func connectingReplacedOnceReady() {
        var machine = Machine(connections: 1, maximumWaiters: 10, reconnect: backoff)
        let id = connects(machine.openIdleSlots())[0].id
        #expect(machine.rotate(to: 1) == 1)
        let early = machine.replaceOne(now: .now())
        #expect(!early.replaced && early.left == 1 && early.actions.isEmpty)
        _ = machine.connectionCreated(id: id, connection: id)
        _ = machine.connectionReady(id: id, capacity: 10, now: .now())
        let step = machine.replaceOne(now: .now())
        #expect(step.replaced && step.left == 0 && closes(step.actions) == [id])
    }

    @Test("a rotation before any connection: nothing to replace, the first connection opens with the new credential")
    func rotationBeforeConnections() {
        var machine = Machine(connections: 2, maximumWaiters: 10, reconnect: backoff)
        #expect(machine.rotate(to: 1) == 0)
        #expect(connects(machine.openIdleSlots()).map(\.generation) == [1, 1])
    }

    @Test("a connection lost during a replacement reconnects with the new credential; a shutdown ends the replacement")
    func lostAndShutdown() {
        var machine = Machine(connections: 2, maximumWaiters: 10, reconnect: backoff)
        let ids = pool(&machine, count: 2)
        #expect(machine.rotate(to: 1) == 2)
        let lost = machine.connectionClosed(id: ids[0], error: nil, now: .now())
        let reconnect = try! #require(reconnects(lost).first)
        #expect(connects(machine.reconnectDue(slot: reconnect.slot, epoch: reconnect.epoch)).map(\.generation) == [1])
        #expect(machine.earlierGenerationConnections == 1)
        #expect(machine.isEarlierGeneration(ids[1]))
        let drained = EmbeddedEventLoop().makePromise(of: Void.self)
        _ = machine.shutdown(drained: drained)
        let step = machine.replaceOne(now: .now())
        #expect(!step.replaced && step.left == 0, "no replacement once shutting down")
        drained.succeed()
    }
}
