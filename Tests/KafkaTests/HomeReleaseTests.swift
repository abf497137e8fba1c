import Foundation
import Kafka
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Notes the thread that dropped its last reference.
private final class Marker: Sendable {
    let releasedOn: TestLocked<pthread_t?>

    init(_ releasedOn: TestLocked<pthread_t?>) {
        self.releasedOn = releasedOn
    }

    deinit {
        releasedOn.withLock { $0 = pthread_self() }
    }
}

/// One thread of its own that runs what it is given, in order, until stopped.
///
/// `@unchecked Sendable`: `id` is written once, by the thread, before `started` is signalled, and
/// read only after `init` has waited for that signal; everything else is a lock or a semaphore.
private final class OneThread: @unchecked Sendable {
    private let work = TestLocked<[@Sendable () -> Void]>([])
    private let ready = DispatchSemaphore(value: 0)
    private let started = DispatchSemaphore(value: 0)
    private let stopped = TestLocked(false)
    /// Set by the thread before `started` is signalled, read after.
    private(set) nonisolated(unsafe) var id = pthread_t()

    init() {
        let thread = Thread { [self] in
            id = pthread_self()
            started.signal()
            while true {
                ready.wait()
                if stopped.withLock({ $0 }) { return }
                let next = work.withLock { $0.removeFirst() }
                next()
            }
        }
        thread.start()
        started.wait()
    }

    /// Runs `body` on the thread and waits for it.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = TestLocked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        work.withLock {
            $0.append {
                result.withLock { $0 = body() }
                done.signal()
            }
        }
        ready.signal()
        done.wait()
        return result.withLock { $0! }
    }

    /// Lets the thread end (its thread-specific storage is destroyed then).
    func stop() {
        stopped.withLock { $0 = true }
        ready.signal()
    }
}

/// A marker put in `bin` from the calling thread (as a poll thread would), held by nothing else.
private struct Probe {
    weak var marker: Marker?
    let releasedOn = TestLocked<pthread_t?>(nil)

    init(putIn bin: HomeRelease.Bin) {
        let marker = Marker(releasedOn)
        self.marker = marker
        bin.put(Unmanaged.passRetained(marker))
    }

    var isAlive: Bool { marker != nil }
}

/// Waits (at most 10 s) until `condition` holds; the tests' assertions follow it.
private func eventually(_ condition: () -> Bool) async {
    for _ in 0..<1000 where !condition() {
        try? await Task.sleep(for: .milliseconds(10))
    }
}

/// Serialized: a sweep in one of these would take another's objects.
@Suite("Freeing on the thread that allocated", .serialized, .timeLimit(.minutes(1)))
struct HomeReleaseTests {
    @Test("an object put in a thread's bin lives until that thread empties its bin, and is freed there")
    func releasedByItsThread() {
        let home = OneThread()
        defer { home.stop() }
        let probe = Probe(putIn: home.run { HomeRelease.here })
        #expect(probe.isAlive, "freed before its thread emptied its bin")
        home.run { HomeRelease.releaseHere() }
        #expect(!probe.isAlive)
        #expect(probe.releasedOn.withLock { $0 } == home.id, "freed on another thread than its bin's")
    }

    @Test("a sweep takes only bins that have waited its age, on the sweeping thread")
    func sweepTakesOnlyWaitingBins() async {
        let home = OneThread()
        defer { home.stop() }
        let probe = Probe(putIn: home.run { HomeRelease.here })
        HomeRelease.sweep(olderThan: .seconds(3600))
        #expect(probe.isAlive, "a sweep took a bin that had not waited its age")
        try? await Task.sleep(for: .milliseconds(20))
        HomeRelease.sweep(olderThan: .milliseconds(10))
        #expect(!probe.isAlive, "a sweep left a bin that had waited longer than its age")
        #expect(probe.releasedOn.withLock { $0 } != home.id)
    }

    @Test("a thread's end frees its bin, and what is put there afterwards is freed at once")
    func threadEndFreesItsBin() async {
        let home = OneThread()
        let bin = home.run { HomeRelease.here }
        let first = Probe(putIn: bin)
        home.stop()
        await eventually { !first.isAlive }
        #expect(!first.isAlive, "a bin outlived its thread with what it held")
        #expect(!Probe(putIn: bin).isAlive, "put into the bin of an ended thread, and kept")
    }

    @Test("a delivered record's callback, and what it captured, is freed by the thread that sent it")
    func deliveryContextFreedBySender() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        let topic = uniqueName("home")
        try cluster.createTopic(topic, partitions: 1)
        // No sweep while the test runs: only the sender and `close` free contexts.
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster), releaseSweep: .seconds(3600))
        let sender = OneThread()
        defer { sender.stop() }

        func send(_ value: UInt8, capturing marker: Marker) async throws {
            let delivered = DispatchSemaphore(value: 0)
            let refused = sender.run { () -> KafkaError? in
                do throws(KafkaError) {
                    try producer.trySend(KafkaProducerMessage(topic: topic, value: [value])) { result in
                        _ = marker  // what a caller's callback captures
                        if case .failure(let error) = result { Issue.record("record \(value) failed: \(error)") }
                        delivered.signal()
                    }
                    return nil
                } catch {
                    return error
                }
            }
            #expect(refused == nil)
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    delivered.wait()
                    continuation.resume()
                }
            }
        }

        let firstReleasedOn = TestLocked<pthread_t?>(nil)
        weak var first: Marker?
        do {
            let marker = Marker(firstReleasedOn)
            first = marker
            try await send(1, capturing: marker)
        }
        #expect(first != nil, "freed on the poll thread, not by the thread that sent it")

        // The poll thread puts a context in its sender's bin just after its callback, so the first is
        // certainly there once the second's callback has run; the third send frees it, if the second
        // did not.
        weak var second: Marker?
        weak var third: Marker?
        do {
            let marker = Marker(TestLocked(nil))
            second = marker
            try await send(2, capturing: marker)
        }
        do {
            let marker = Marker(TestLocked(nil))
            third = marker
            try await send(3, capturing: marker)
        }
        #expect(first == nil)
        #expect(firstReleasedOn.withLock { $0 } == sender.id, "freed on another thread than its sender")

        await producer.close()  // its sender does not send again: closing frees the last
        #expect(second == nil && third == nil, "a closed producer's callback outlived it")
    }
}
