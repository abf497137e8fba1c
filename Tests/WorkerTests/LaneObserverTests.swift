import Testing
import Threading

@testable import Worker

@Suite("Lanes report as one worker")
struct LaneObserverTests {
    /// What the shared observer was told, in order.
    final class Recorder: PipelineObserver {
        let calls = Locked<[String]>([])
        func inFlightChanged(_ count: Int) { calls.withLock { $0.append("inFlight \(count)") } }
        func inputHeldChanged(_ held: Bool) { calls.withLock { $0.append("held \(held)") } }
        func consumerJoined() { calls.withLock { $0.append("joined") } }
        func consumerLeft() { calls.withLock { $0.append("left") } }
        func resultsWaiting(unacknowledged: Int, for: Duration) { calls.withLock { $0.append("waiting") } }
        func resultsAccepted() { calls.withLock { $0.append("accepted") } }
        func producerRecovered() { calls.withLock { $0.append("recovered") } }
        func consumed(topic: String) { calls.withLock { $0.append("consumed \(topic)") } }
        var all: [String] { calls.withLock { $0 } }
    }

    let recorder = Recorder()
    let tally = LaneObserver.Tally(lanes: 2)
    var bulk: LaneObserver { LaneObserver(base: recorder, lane: 0, tally: tally) }
    var urgent: LaneObserver { LaneObserver(base: recorder, lane: 1, tally: tally) }

    @Test("events in flight are the lanes' sum")
    func inFlightIsTheSum() {
        bulk.inFlightChanged(20)
        urgent.inFlightChanged(3)
        bulk.inFlightChanged(19)
        #expect(recorder.all == ["inFlight 20", "inFlight 23", "inFlight 22"])
    }

    @Test("input is held while either lane's is")
    func heldWhileEither() {
        bulk.inputHeldChanged(true)
        urgent.inputHeldChanged(false)
        bulk.inputHeldChanged(false)
        #expect(recorder.all == ["held true", "held true", "held false"])
    }

    @Test("the consumer is joined once both members are; either leaving says so")
    func joinedWhenBoth() {
        bulk.consumerJoined()
        #expect(recorder.all.isEmpty, "one member of two is not the worker joined")
        urgent.consumerJoined()
        urgent.consumerLeft()
        #expect(recorder.all == ["joined", "left"])
    }

    @Test("results accepted again only once neither lane's producer waits")
    func acceptedWhenNeitherWaits() {
        bulk.resultsWaiting(unacknowledged: 5, for: .seconds(3))
        urgent.resultsWaiting(unacknowledged: 1, for: .seconds(3))
        bulk.resultsAccepted()
        #expect(recorder.all == ["waiting", "waiting"], "the urgent lane's results still wait")
        urgent.producerRecovered()
        #expect(recorder.all == ["waiting", "waiting", "recovered"])
    }

    @Test("counts pass through as they come")
    func countsPassThrough() {
        bulk.consumed(topic: "campaigns")
        urgent.consumed(topic: "signin")
        #expect(recorder.all == ["consumed campaigns", "consumed signin"])
    }
}

@Suite("Lanes share one sender, closed once")
struct SharedSenderTests {
    final class CountingSender: NotificationSending {
        let shutdowns = Locked(0)
        func send(_ requests: [NotificationRequest]) {}
        func shutdown() async { shutdowns.withLock { $0 += 1 } }
    }

    @Test("the connections close once, after the last lane asks; the first lane waits until then")
    func closesOnceAfterTheLast() async throws {
        let inner = CountingSender()
        let shared = SharedSender(inner, lanes: 2)
        let first = Task { await shared.shutdown() }
        try await Task.sleep(for: .milliseconds(200))
        #expect(inner.shutdowns.withLock { $0 } == 0, "one lane of two: the connections stay open")
        await shared.shutdown()
        await first.value
        #expect(inner.shutdowns.withLock { $0 } == 1)
        await shared.shutdown()
        #expect(inner.shutdowns.withLock { $0 } == 1, "a later call returns at once, closing nothing again")
    }
}
