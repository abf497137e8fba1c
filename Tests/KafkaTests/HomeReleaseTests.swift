import Foundation
import Kafka
import TestPeers
import Testing
import Threading

#if canImport(Glibc)
    import Glibc
#endif

/// A marker put in `bin` from the calling thread (as a poll thread would), held by nothing else.
private struct Probe {
    weak var marker: ReleaseMarker?
    let releasedOn = Locked<pthread_t?>(nil)

    init(putIn bin: HomeRelease.Bin) {
        let marker = ReleaseMarker(reportingTo: releasedOn)
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
        let home = TestThread()
        defer { home.stop() }
        let probe = Probe(putIn: home.run { HomeRelease.here })
        #expect(probe.isAlive, "freed before its thread emptied its bin")
        home.run { HomeRelease.releaseHere() }
        #expect(!probe.isAlive)
        #expect(probe.releasedOn.withLock { $0 } == home.id, "freed on another thread than its bin's")
    }

    @Test("a thread's bin is offered to other code only once the thread has emptied it")
    func attendedOnlyOnceEmptied() {
        let home = TestThread()
        defer { home.stop() }
        let before = home.run { (HomeRelease.here, HomeRelease.attendedHere) }
        #expect(before.1 == nil, "a bin its thread has never emptied was offered")
        let after = home.run {
            HomeRelease.releaseHere()
            return HomeRelease.attendedHere
        }
        #expect(after === before.0)
        let fresh = TestThread()
        defer { fresh.stop() }
        #expect(fresh.run { HomeRelease.attendedHere } == nil)
        #expect(
            fresh.run { () -> HomeRelease.Bin? in
                HomeRelease.releaseHere()  // the first call makes the bin, and attends it
                return HomeRelease.attendedHere
            } != nil)
    }

    @Test("a sweep takes only bins that have waited its age, on the sweeping thread")
    func sweepTakesOnlyWaitingBins() async {
        let home = TestThread()
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
        let home = TestThread()
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
        let sender = TestThread()
        defer { sender.stop() }

        func send(_ value: UInt8, capturing marker: ReleaseMarker) async throws {
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

        let firstReleasedOn = Locked<pthread_t?>(nil)
        weak var first: ReleaseMarker?
        do {
            let marker = ReleaseMarker(reportingTo: firstReleasedOn)
            first = marker
            try await send(1, capturing: marker)
        }
        #expect(first != nil, "freed on the poll thread, not by the thread that sent it")

        // The poll thread puts a context in its sender's bin just after its callback, so the first is
        // certainly there once the second's callback has run; the third send frees it, if the second
        // did not.
        weak var second: ReleaseMarker?
        weak var third: ReleaseMarker?
        do {
            let marker = ReleaseMarker()
            second = marker
            try await send(2, capturing: marker)
        }
        do {
            let marker = ReleaseMarker()
            third = marker
            try await send(3, capturing: marker)
        }
        #expect(first == nil)
        #expect(firstReleasedOn.withLock { $0 } == sender.id, "freed on another thread than its sender")

        await producer.close()  // its sender does not send again: closing frees the last
        #expect(second == nil && third == nil, "a closed producer's callback outlived it")
    }
}
