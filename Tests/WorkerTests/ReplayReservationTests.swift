import Foundation
import Kafka
import Logging
import Synchronization
import Testing

@testable import Worker

/// One consumer group's committed offsets in memory, shared by the runs of a test.
actor MemoryOffsets {
    private var stored: [KafkaTopicPartition: KafkaTopicPartitionOffset] = [:]

    func read(_ partitions: [KafkaTopicPartition]) -> [KafkaTopicPartition: KafkaTopicPartitionOffset] {
        stored.filter { partitions.contains($0.key) }
    }

    func write(_ offsets: [KafkaTopicPartitionOffset]) {
        for offset in offsets { stored[offset.topicPartition] = offset }
    }

    /// The run whose reservation the metadata stored for `partition` carries.
    func reservationHolder(_ partition: KafkaTopicPartition) -> String? {
        stored[partition].flatMap { offset in
            offset.metadata.flatMap { try? CommitMetadata.decode($0, committed: offset.offset) }?.reservation?.holder
        }
    }
}

/// Held until opened: a write that the network delays for as long as the test wants.
actor Gate {
    private var isOpen = false
    private var reached = false
    private var held: [CheckedContinuation<Void, Never>] = []
    private var watchers: [CheckedContinuation<Void, Never>] = []

    func pass() async {
        reached = true
        for watcher in watchers { watcher.resume() }
        watchers = []
        if !isOpen { await withCheckedContinuation { held.append($0) } }
    }

    /// Returns once something waits at the gate.
    func reachedByWrite() async {
        if !reached { await withCheckedContinuation { watchers.append($0) } }
    }

    func open() {
        isOpen = true
        for waiter in held { waiter.resume() }
        held = []
    }
}

/// The reservation's clock in a test: it moves only when the test advances it, and a run's wait on it ends
/// only then. How long Kafka took is what the test advanced while a write was held, whatever else
/// the machine runs (a CI machine once took 7 s over the hand-offs of a write the test meant quick).
final class ManualReservationTime: Sendable {
    private struct State {
        var offset = Duration.zero
        var sleepers: [(deadline: Duration, wake: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())
    private let base = ContinuousClock.now

    var clock: ReservationClock {
        ReservationClock(now: { [self] in base + state.withLock { $0.offset } }, sleep: { [self] in await sleep($0) })
    }

    private func sleep(_ duration: Duration) async {
        await withCheckedContinuation { wake in
            state.withLock { $0.sleepers.append(($0.offset + duration, wake)) }
        }
    }

    func advance(by duration: Duration) {
        let woken = state.withLock { state in
            state.offset += duration
            let now = state.offset
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.wake.resume() }
    }

    /// Returns once `count` runs wait on this clock.
    func waitForSleepers(_ count: Int) async throws {
        while state.withLock({ $0.sleepers.count }) < count { try await Task.sleep(for: .milliseconds(2)) }
    }
}

/// One run's view of a group: what it writes with a reservation waits at `gate` first, if there is one.
struct MemoryGroup: CommittedOffsets {
    let offsets: MemoryOffsets
    var gate: Gate?

    func readCommitted(
        _ partitions: [KafkaTopicPartition]
    ) async throws -> [KafkaTopicPartition: KafkaTopicPartitionOffset] {
        await offsets.read(partitions)
    }

    func writeCommitted(_ written: [KafkaTopicPartitionOffset]) async throws {
        let reserved = written.contains { $0.metadata?.contains(" l=") == true }
        if reserved, let gate { await gate.pass() }
        await offsets.write(written)
    }
}

/// The reservation protocol of `ReplayCursorStore` step by step, with the order in which Kafka applies
/// the runs' writes set by the test (a write held back stands for a slow network or broker).
@Suite("Replay's reservation of its cursors, write by write", .timeLimit(.minutes(1)))
struct ReplayReservationTests {
    static let partition = KafkaTopicPartition(topic: "dlq", partition: 0)
    let cursors = MemoryOffsets()
    let claims = MemoryOffsets()

    static let settle: Duration = .milliseconds(50)

    /// A run on `time`'s clock, or, without it, on the continuous clock.
    func run(_ name: String, gate: Gate? = nil, time: ManualReservationTime? = nil) -> ReplayCursorStore {
        var store = ReplayCursorStore(
            holder: name, groups: [.credentials: MemoryGroup(offsets: cursors, gate: gate)],
            claims: [.credentials: MemoryGroup(offsets: claims)], partitions: [Self.partition],
            lows: [Self.partition: 0], duration: .seconds(60), settle: Self.settle, logger: Logger(label: "test"))
        if let time { store.clock = time.clock }
        return store
    }

    static func refusal(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch {
            return "\(error)"
        }
    }

    // The case the wait alone could not rule out: a run read the cursors free, and its store
    // reached Kafka only after another run had stored its own, waited and gone on. It used to
    // be refused only because it noticed its own store took long, and then gave its reservation up,
    // letting a third run in beside the one that went on.
    @Test("a run whose reservation lands after another run went on is refused, however late, and keeps others out")
    func lateStore() async throws {
        let (time, gate) = (ManualReservationTime(), Gate())
        let slow = run("slow-run", gate: gate, time: time)
        async let slowOutcome = Self.refusal { _ = try await slow.acquire() }
        await gate.reachedByWrite()  // read the cursors free, wrote its claim; its store is on the way
        let quick = run("quick-run", time: time)
        async let quickOutcome = Self.attempt(quick)
        try await time.waitForSleepers(1)  // quick-run stored its reservation and waits
        time.advance(by: .seconds(1))  // slow-run's store has been on the way a second: over the settle
        let held = try await quickOutcome.get()
        await gate.open()
        try await time.waitForSleepers(1)  // slow-run stored, over quick-run's reservation, and waits
        time.advance(by: .seconds(2))
        let refused = try #require(await slowOutcome, "both runs went on")
        #expect(refused.contains("another replay run (quick-run) started at the same time"), "\(refused)")
        #expect(refused.contains("nothing was replayed") && refused.contains("lapses at"), "\(refused)")
        // Its store came over the reservation of a run that went on: its own stays, keeping a third run
        // out until it lapses, rather than leaving the cursors free while quick-run replays.
        #expect(await cursors.reservationHolder(Self.partition) == "slow-run")
        let third = await Self.refusal { _ = try await run("third-run").acquire() }
        #expect(third?.contains("another replay run (slow-run) has reserved") == true, "\(String(describing: third))")
        // The run that went on finds its reservation stored over at its next checkpoint and stops.
        let checkpoint = await Self.refusal { try await quick.renew(held.cursors) }
        #expect(checkpoint?.contains("taken over by replay run slow-run") == true, "\(String(describing: checkpoint))")
    }

    @Test("two runs whose writes crossed are both refused, and both let go at once when Kafka was quick")
    func crossedWrites() async throws {
        let (time, gate) = (ManualReservationTime(), Gate())
        let first = run("first-run", gate: gate, time: time)
        async let firstOutcome = Self.refusal { _ = try await first.acquire() }
        await gate.reachedByWrite()  // claimed first; its store comes last
        let second = run("second-run", time: time)
        async let secondOutcome = Self.refusal { _ = try await second.acquire() }
        try await time.waitForSleepers(1)  // second-run stored its reservation and waits
        time.advance(by: .milliseconds(10))  // first-run's store took 10 ms: under the settle, Kafka was quick
        await gate.open()
        try await time.waitForSleepers(2)  // first-run stored over it and waits too
        time.advance(by: Self.settle)
        let (one, two) = await (firstOutcome, secondOutcome)
        // first-run reads its own reservation but second-run's claim; second-run reads first-run's reservation
        // (or, if first-run let go already, a cursor without a reservation where its own was).
        #expect(
            one?.contains("another replay run (second-run) started at the same time") == true,
            "\(String(describing: one))")
        #expect(two?.contains("another replay run") == true, "\(String(describing: two))")
        #expect(one?.contains("lapses") == false && two?.contains("lapses") == false, "both let go at once")
        // Nothing of either reservation is left: a run started now goes on.
        #expect(await cursors.reservationHolder(Self.partition) == nil)
        let third = run("third-run")
        let held = try await third.acquire()
        try await third.giveUp(held.cursors)
    }

    @Test("of two runs started together, the one that wrote claim and cursors last goes on; the other lets go")
    func laterWriterGoesOn() async throws {
        let (time, firstGate, secondGate) = (ManualReservationTime(), Gate(), Gate())
        let first = run("first-run", gate: firstGate, time: time)
        let second = run("second-run", gate: secondGate, time: time)
        async let firstOutcome = Self.refusal { _ = try await first.acquire() }
        await firstGate.reachedByWrite()  // claimed, read the cursors free
        async let secondOutcome = Self.attempt(second)
        await secondGate.reachedByWrite()  // claimed after it, read them free too
        await firstGate.open()
        try await time.waitForSleepers(1)  // first-run stored its reservation and waits
        await secondGate.open()
        try await time.waitForSleepers(2)  // second-run stored over it and waits too
        time.advance(by: Self.settle)  // no time passed at either gate: Kafka was quick
        let refused = await firstOutcome
        let held = try await secondOutcome.get()
        #expect(
            refused?.contains("another replay run (second-run) has reserved") == true, "\(String(describing: refused))")
        #expect(refused?.contains("lapses") == false, "Kafka was quick: nothing of its reservation is left to lapse")
        let third = run("third-run")
        let busy = await Self.refusal { _ = try await third.acquire() }
        #expect(busy?.contains("another replay run (second-run) has reserved") == true, "\(String(describing: busy))")
        try await second.giveUp(held.cursors)
        try await third.giveUp(try await third.acquire().cursors)
    }

    static func attempt(_ store: ReplayCursorStore) async -> Result<ReplayCursorStore.Start, any Error> {
        do { return .success(try await store.acquire()) } catch { return .failure(error) }
    }
    // A checkpoint could take most of the reservation (a flush of up to half of it, then the cursors' reads
    // and stores), and the run went on producing until its next checkpoint found the reservation gone: by
    // then another run could reserve the cursors and replay the same dead letters.
    @Test("a run stops producing once its reservation may have lapsed, and a renewal extends it")
    func holdLapses() async throws {
        let time = ManualReservationTime()
        let store = run("slow-run", time: time)
        async let acquired = store.acquire()
        try await time.waitForSleepers(1)  // stored its reservation, waits the settle
        time.advance(by: Self.settle)
        let held = try await acquired
        #expect(store.reservationLasts, "just acquired")
        time.advance(by: .seconds(30))
        try await store.renew(held.cursors)  // stored again at 30 s: held until 90 s
        time.advance(by: .seconds(40))
        #expect(store.reservationLasts, "renewed: 20 s left")
        time.advance(by: .seconds(20) - Self.settle)
        #expect(!store.reservationLasts, "less than the settle left of the reservation: stop")
        await #expect(throws: DeadLetterReplayer.ReplayError.self) { try await store.renew(held.cursors) }
        let fresh = run("fresh-run", time: time)
        #expect(fresh.reservationLasts, "no reservation written: nothing to lapse")
    }
}
