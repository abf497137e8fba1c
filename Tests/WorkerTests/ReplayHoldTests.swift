import Foundation
import Kafka
import Logging
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

    /// The run whose lease the metadata stored for `partition` carries.
    func leaseHolder(_ partition: KafkaTopicPartition) -> String? {
        stored[partition].flatMap { offset in
            offset.metadata.flatMap { try? CommitMetadata.decode($0, committed: offset.offset) }?.lease?.holder
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

/// One run's view of a group: what it writes with a lease waits at `gate` first, if there is one.
struct MemoryGroup: CommittedOffsets {
    let offsets: MemoryOffsets
    var gate: Gate?

    func readCommitted(
        _ partitions: [KafkaTopicPartition]
    ) async throws -> [KafkaTopicPartition: KafkaTopicPartitionOffset] {
        await offsets.read(partitions)
    }

    func writeCommitted(_ written: [KafkaTopicPartitionOffset]) async throws {
        let leased = written.contains { $0.metadata?.contains(" l=") == true }
        if leased, let gate { await gate.pass() }
        await offsets.write(written)
    }
}

/// The hold protocol of `ReplayCursorStore` step by step, with the order in which Kafka applies
/// the runs' writes set by the test (a write held back stands for a slow network or broker).
@Suite("Replay's hold on its cursors, write by write", .timeLimit(.minutes(1)))
struct ReplayHoldTests {
    static let partition = KafkaTopicPartition(topic: "dlq", partition: 0)
    let cursors = MemoryOffsets()
    let claims = MemoryOffsets()

    func run(_ name: String, settle: Duration, gate: Gate? = nil) -> ReplayCursorStore {
        ReplayCursorStore(
            holder: name, groups: [.credentials: MemoryGroup(offsets: cursors, gate: gate)],
            claims: [.credentials: MemoryGroup(offsets: claims)], partitions: [Self.partition],
            lows: [Self.partition: 0], duration: .seconds(60), settle: settle, logger: Logger(label: "test"))
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
    // be refused only because it noticed its own store took long, and then gave its lease up,
    // letting a third run in beside the one that went on.
    @Test("a run whose hold lands after another run went on is refused, however late, and keeps others out")
    func lateStore() async throws {
        let gate = Gate()
        let slow = run("slow-run", settle: .milliseconds(50), gate: gate)
        async let slowOutcome = Self.refusal { _ = try await slow.acquire() }
        await gate.reachedByWrite()  // read the cursors free, wrote its claim; its store is on the way
        let quick = run("quick-run", settle: .milliseconds(50))
        let held = try await quick.acquire()
        await gate.open()
        let refused = try #require(await slowOutcome, "both runs went on")
        #expect(refused.contains("another replay run (quick-run) started at the same time"), "\(refused)")
        #expect(refused.contains("nothing was replayed") && refused.contains("lapses at"), "\(refused)")
        // Its store came over the lease of a run that went on: its own stays, keeping a third run
        // out until it lapses, rather than leaving the cursors free while quick-run replays.
        #expect(await cursors.leaseHolder(Self.partition) == "slow-run")
        let third = await Self.refusal { _ = try await run("third-run", settle: .milliseconds(50)).acquire() }
        #expect(third?.contains("another replay run (slow-run) holds") == true, "\(String(describing: third))")
        // The run that went on finds its lease stored over at its next checkpoint and stops.
        let checkpoint = await Self.refusal { try await quick.renew(held.cursors) }
        #expect(checkpoint?.contains("taken over by replay run slow-run") == true, "\(String(describing: checkpoint))")
    }

    @Test("two runs whose writes crossed are both refused, and both let go at once when Kafka was quick")
    func crossedWrites() async throws {
        // A settle well above what the test's own hand-offs take on a loaded machine: each run's blind
        // time includes its wait at the gate, and "Kafka was quick" means under the settle.
        let gate = Gate()
        let first = run("first-run", settle: Self.quickSettle, gate: gate)
        async let firstOutcome = Self.refusal { _ = try await first.acquire() }
        await gate.reachedByWrite()  // claimed first; its store comes last
        let second = run("second-run", settle: Self.quickSettle)
        async let secondOutcome = Self.refusal { _ = try await second.acquire() }
        while await cursors.leaseHolder(Self.partition) != "second-run" { try await Task.sleep(for: .milliseconds(2)) }
        await gate.open()
        let (one, two) = await (firstOutcome, secondOutcome)
        // first-run reads its own lease but second-run's claim; second-run reads first-run's lease
        // (or, if first-run let go already, a lease-less cursor where its own was).
        #expect(
            one?.contains("another replay run (second-run) started at the same time") == true,
            "\(String(describing: one))")
        #expect(two?.contains("another replay run") == true, "\(String(describing: two))")
        #expect(one?.contains("lapses") == false && two?.contains("lapses") == false, "both let go at once")
        // Nothing of either hold is left: a run started now goes on.
        #expect(await cursors.leaseHolder(Self.partition) == nil)
        let third = run("third-run", settle: .milliseconds(50))
        let held = try await third.acquire()
        try await third.release(held.cursors)
    }

    @Test("of two runs started together, the one that wrote claim and cursors last goes on; the other lets go")
    func laterWriterGoesOn() async throws {
        let (firstGate, secondGate) = (Gate(), Gate())
        let first = run("first-run", settle: Self.quickSettle, gate: firstGate)
        let second = run("second-run", settle: Self.quickSettle, gate: secondGate)
        async let firstOutcome = Self.refusal { _ = try await first.acquire() }
        await firstGate.reachedByWrite()  // claimed, read the cursors free
        async let secondOutcome = Self.attempt(second)
        await secondGate.reachedByWrite()  // claimed after it, read them free too
        await firstGate.open()
        while await cursors.leaseHolder(Self.partition) != "first-run" { try await Task.sleep(for: .milliseconds(2)) }
        await secondGate.open()
        let refused = await firstOutcome
        let held = try await secondOutcome.get()
        #expect(refused?.contains("another replay run (second-run) holds") == true, "\(String(describing: refused))")
        #expect(refused?.contains("lapses") == false, "Kafka was quick: nothing of its hold is left to lapse")
        let third = run("third-run", settle: .milliseconds(50))
        let busy = await Self.refusal { _ = try await third.acquire() }
        #expect(busy?.contains("another replay run (second-run) holds") == true, "\(String(describing: busy))")
        try await second.release(held.cursors)
        try await third.release(try await third.acquire().cursors)
    }

    /// The settle of the runs whose blind time must stay under it: their hand-offs at the test's
    /// gates took over a second on a loaded 2-core machine (a CI run beside a benchmark).
    static let quickSettle: Duration = .seconds(5)

    static func attempt(_ store: ReplayCursorStore) async -> Result<ReplayCursorStore.Held, any Error> {
        do { return .success(try await store.acquire()) } catch { return .failure(error) }
    }
}
