import APNs
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

@Suite("Lanes' APNs pools in the metrics")
struct LanePoolStatisticsTests {
    static func pool(ready: Int, inUse: Int, capacity: Int, waiting: Int) -> APNsPoolStatistics {
        var pool = APNsPoolStatistics()
        pool.readyConnections = ready
        pool.streamsInUse = inUse
        pool.streamCapacity = capacity
        pool.waitingRequests = waiting
        return pool
    }

    @Test("each credential's gauges count both lanes' connections; a pool only one lane has passes through")
    func summedPerCredential() {
        let bulk: [(credential: String, environment: APNsEnvironment, APNsPoolStatistics)] = [
            ("app", .production, Self.pool(ready: 8, inUse: 7000, capacity: 8000, waiting: 40)),
            ("other", .development, Self.pool(ready: 8, inUse: 10, capacity: 8000, waiting: 0)),
        ]
        let urgent: [(credential: String, environment: APNsEnvironment, APNsPoolStatistics)] = [
            ("app", .production, Self.pool(ready: 1, inUse: 3, capacity: 1000, waiting: 0))
        ]
        let combined = APNsSender.combined([bulk, urgent])
        #expect(
            combined.map { "\($0.credential) \($0.environment.rawValue)" } == ["app production", "other development"])
        #expect(combined[0].2 == Self.pool(ready: 9, inUse: 7003, capacity: 9000, waiting: 40))
        #expect(combined[1].2 == bulk[1].2)
    }
}

@Suite("Lanes: liveness is every lane's")
struct LaneLivenessTests {
    final class Beats: PipelineObserver {
        let count = Locked(0)
        func heartbeat() { count.withLock { $0 += 1 } }
    }

    @Test("one lane's beats do not keep the worker live while the other lane beats no more")
    func stuckLaneStopsTheBeats() {
        let beats = Beats()
        let tally = LaneObserver.Tally(lanes: 2)
        let bulk = LaneObserver(base: beats, lane: 0, tally: tally)
        let urgent = LaneObserver(base: beats, lane: 1, tally: tally)
        bulk.heartbeat()
        urgent.heartbeat()
        let live = beats.count.withLock { $0 }
        #expect(live >= 1, "both lanes beat: the worker is live")
        // The bulk lane's reader sticks: it beats no more, the urgent lane goes on.
        for _ in 0..<10 { urgent.heartbeat() }
        #expect(beats.count.withLock { $0 } == live, "the urgent lane alone kept liveness green")
        bulk.heartbeat()
        #expect(beats.count.withLock { $0 } == live + 1, "each lane beat again: live again")
    }
}
