import Foundation
import Kafka
import NIOConcurrencyHelpers
import Testing

@testable import Worker

/// A revocation hands its partitions' leases over, then sweeps what of them waits (retry timers,
/// parked events) so that its drain is quick. A wait registered just after the sweep, by an event
/// that looked at its lease just before the hand-over, must not escape it: the drain would wait for
/// it (a whole backoff, up to `revocationTimeout`) while holding the group's rebalance.
@Suite("Waits registered after a revocation's sweep")
struct LateRegistrationTests {
    let p0 = KafkaTopicPartition(topic: "events", partition: 0)

    @Test("a retry wait registered after its lease's waits were cancelled runs at once, as cancelled")
    func waitAfterTheSweep() {
        let scheduler = EventLoopDelayScheduler()
        let lease = PartitionLease(p0)
        lease.handOver()
        scheduler.cancel(lease: lease)  // the revocation's sweep, before the late registration
        let fired = NIOLockedValueBox<[Bool]>([])
        scheduler.after(.seconds(30), lease: lease) { cancelled in fired.withLockedValue { $0.append(cancelled) } }
        #expect(fired.withLockedValue { $0 } == [true], "waits out its 30 s backoff")
        #expect(scheduler.pendingCount == 0)
        scheduler.cancelAll()
    }

    /// Parks nothing, publishes nothing: the pipeline's state is what is tested.
    struct NoOutlet: EventOutlet {
        func publishDeadLetter(of run: EventRun) {}
        func publishResult(of run: EventRun) {}
        func ended(_ run: EventRun, done: Bool) {}
    }

    func run(offset: Int64, lease: PartitionLease) -> EventRun {
        let processor = EventProcessorTests.processor(
            EventProcessorTests.ScriptedSender([]), EventProcessorTests.ManualScheduler())
        return EventRun(
            record: EventProcessorTests.record(EventProcessorTests.valid, offset: offset), event: nil, bytes: 0,
            lease: lease, started: .now, result: EventResult(eventID: nil, outcome: .delivered, attempts: 0),
            processor: processor, outlet: NoOutlet())
    }

    @Test("an event over its credential's share whose partition was handed over is not parked after the sweep")
    func noParkingAfterTheSweep() throws {
        var state = WorkerPipeline.StateMachine(maxInFlight: 10, shareCap: 1)
        _ = state.assign([p0], tenure: 1)
        let lease = try #require(state.ownership.lease(of: p0))
        for offset: Int64 in 0..<2 { _ = state.admit(p0, offset: offset, lease: lease) }
        #expect(state.begin(run(offset: 0, lease: lease), credential: "a") == nil, "the first runs in the share")
        lease.handOver()
        #expect(state.takeParked(all: false).runs.isEmpty, "the sweep: nothing parked yet")
        // The second event of the credential reaches its first attempt now: parked, it would wait for
        // the first to end (a backoff, a black-holed APNs), and the revocation's drain with it.
        #expect(state.begin(run(offset: 1, lease: lease), credential: "a") == nil, "parked after the sweep")
        #expect(state.parked == 0)
    }
}
