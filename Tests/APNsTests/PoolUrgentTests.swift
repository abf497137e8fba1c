import NIOCore
import Testing

@testable import APNs

@Suite("Connection pool: urgent requests before bulk ones")
struct PoolUrgentTests {
    typealias Machine = APNsConnectionPool.StateMachine<Int, Int>
    let backoff = Machine.Reconnect(base: .milliseconds(100), maximum: .seconds(10), healthyAfter: .seconds(10))

    private func dispatched(_ actions: [Machine.Action]) -> [Int] {
        actions.compactMap { if case .dispatch(let waiter, _, _) = $0 { return waiter } else { return nil } }
    }

    /// One connection with `capacity` streams, ready; `reserved` streams kept for urgent requests.
    private func machine(capacity: Int, reserved: Int = 0) -> (Machine, Int) {
        var machine = Machine(connections: 1, maximumWaiters: 100, reconnect: backoff, reservedStreams: reserved)
        var connecting: [Machine.Action] = []
        _ = machine.acquire(0, waiterID: 0, connecting: &connecting)
        let id = connecting.compactMap { if case .connect(_, let id, _) = $0 { return id } else { return nil } }[0]
        _ = machine.connectionCreated(id: id, connection: id)
        #expect(dispatched(machine.connectionReady(id: id, capacity: capacity, now: .now())) == [0])
        return (machine, id)
    }

    @Test("a stream freed goes to the urgent request waiting, not to the bulk ones queued before it")
    func urgentJumpsTheQueue() {
        var (machine, id) = machine(capacity: 2)
        #expect(dispatched(machine.acquire(1, waiterID: 1)) == [1])
        // Full: three bulk requests wait, then an urgent one.
        for waiter in 2...4 { #expect(dispatched(machine.acquire(waiter, waiterID: waiter)).isEmpty) }
        #expect(dispatched(machine.acquire(99, waiterID: 99, urgent: true)).isEmpty)
        #expect(machine.waiterCount == 4)
        #expect(dispatched(machine.release(connectionID: id)) == [99])
        #expect(dispatched(machine.release(connectionID: id)) == [2], "then the bulk ones, in their order")
        #expect(dispatched(machine.release(connectionID: id)) == [3])
    }

    @Test("urgent requests wait in their own order")
    func urgentInOrder() {
        var (machine, id) = machine(capacity: 1)
        #expect(dispatched(machine.acquire(50, waiterID: 50, urgent: true)).isEmpty)
        #expect(dispatched(machine.acquire(51, waiterID: 51, urgent: true)).isEmpty)
        #expect(dispatched(machine.release(connectionID: id)) == [50])
        #expect(dispatched(machine.release(connectionID: id)) == [51])
    }

    @Test("bulk requests leave the reserved streams free; an urgent one takes one at once")
    func reservedStreams() {
        var (machine, _) = machine(capacity: 10, reserved: 3)
        // Waiter 0 holds one stream: six more bulk ones fit, leaving three free.
        for waiter in 1...6 { #expect(dispatched(machine.acquire(waiter, waiterID: waiter)) == [waiter]) }
        #expect(dispatched(machine.acquire(7, waiterID: 7)).isEmpty, "the next bulk one waits: three are kept")
        #expect(dispatched(machine.acquire(90, waiterID: 90, urgent: true)) == [90])
        #expect(dispatched(machine.acquire(91, waiterID: 91, urgent: true)) == [91])
        #expect(machine.statistics.streamsInUse == 9)
    }

    @Test("a reserve larger than half the streams keeps half: bulk requests are still served")
    func reserveAtMostHalf() {
        var (machine, _) = machine(capacity: 4, reserved: 100)
        // Waiter 0 holds one stream; half of four kept: one more bulk request fits.
        #expect(dispatched(machine.acquire(1, waiterID: 1)) == [1])
        #expect(dispatched(machine.acquire(2, waiterID: 2)).isEmpty)
        #expect(dispatched(machine.acquire(80, waiterID: 80, urgent: true)) == [80])
    }

    @Test("an urgent request that gives up waiting is failed and leaves the queue; the bulk ones stay")
    func urgentGivesUp() {
        var (machine, id) = machine(capacity: 1)
        _ = machine.acquire(2, waiterID: 2)
        _ = machine.acquire(70, waiterID: 70, urgent: true)
        let error = APNsClientError(.deadlineExceeded, "test", mayHaveReachedAPNs: false)
        let actions = machine.giveUp(waiterIDs: [70], error)
        #expect(actions.contains { if case .fail(70, _) = $0 { true } else { false } })
        #expect(machine.waiterCount == 1)
        #expect(dispatched(machine.release(connectionID: id)) == [2])
    }
}
