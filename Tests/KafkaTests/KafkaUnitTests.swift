import Foundation
import Logging
import TestPeers
import Testing

@testable import Kafka

@Suite("Kafka wrapper: pure parts")
struct KafkaUnitTests {
    @Test("a loaded librdkafka older than 2.14.2 is refused, naming what was loaded and what it was built with")
    func olderLibraryRefused() throws {
        let refusal = try #require(KafkaLibrary.refusal(loaded: 0x0208_00ff, compiled: 0x020e_02ff))
        #expect(
            refusal.hasPrefix(
                "librdkafka 2.8.0 is loaded, and apns-worker needs 2.14.2 or later (it was built against 2.14.2)"))
        #expect(KafkaLibrary.refusal(loaded: 0x020e_01ff) != nil, "2.14.1 is older")
        #expect(KafkaLibrary.refusal(loaded: 0x020e_02ff) == nil)
        #expect(KafkaLibrary.refusal(loaded: 0x020f_00ff) == nil)
        #expect(KafkaLibrary.refusal() == nil, "the tests run on the library they were built with")
    }

    func record(_ partition: Int32, _ offset: Int64) -> KafkaConsumerMessage {
        KafkaConsumerMessage(topic: "t", partition: partition, offset: offset, key: nil, value: [])
    }

    @Test("the librdkafka loaded is the one compiled against, and a supported one")
    func libraryVersion() {
        // Printed into the test log (make test): which librdkafka these tests ran on.
        print(
            "librdkafka \(KafkaLibrary.version) loaded (0x\(String(KafkaLibrary.versionNumber, radix: 16))), "
                + "compiled against \(KafkaLibrary.describe(KafkaLibrary.compiledVersionNumber))")
        // Another librdkafka.so.1 than the headers' (the system's, when the run path is missing)
        // would run the tests on a library the build never saw.
        #expect(KafkaLibrary.versionNumber == KafkaLibrary.compiledVersionNumber)
        #expect(KafkaLibrary.versionNumber >= KafkaLibrary.minimumVersionNumber)
        #expect(KafkaLibrary.version == KafkaLibrary.describe(KafkaLibrary.versionNumber))
    }

    @Test("a full buffer holds the poller, then pauses every assigned partition, and resumes at half")
    func flowControl() {
        var state = KafkaConsumerCore.StateMachine(capacity: 4)
        let partitions = [KafkaTopicPartition(topic: "t", partition: 0), KafkaTopicPartition(topic: "t", partition: 1)]
        state.assign(partitions)
        state.pause([partitions[1]])
        #expect(state.desiredPauses == [partitions[1]])
        for offset in 0..<4 {
            guard case .poll = state.checkSpace() else { return #expect(Bool(false), "room for record \(offset)") }
            guard case .buffered = state.push(record(0, Int64(offset))) else { return #expect(Bool(false)) }
        }
        // Full: the poller waits, and the reader wakes it once it has freed `wakeBatch` slots (here,
        // with 4, half; with the default 2,048, 64): one wake-up per batch, not one per record.
        guard case .wait = state.checkSpace() else { return #expect(Bool(false), "a full buffer holds the poller") }
        guard case .message(let first, pausesChanged: false, wakePoller: false) = state.take() else {
            return #expect(Bool(false), "one record taken: not yet")
        }
        #expect(first.offset == 0)
        guard case .message(_, pausesChanged: false, wakePoller: true) = state.take() else {
            return #expect(Bool(false), "drained to half: wake the poller")
        }
        guard case .message(_, pausesChanged: false, wakePoller: false) = state.take() else {
            return #expect(Bool(false), "woken once")
        }
        for offset in 4..<7 { _ = state.push(record(0, Int64(offset))) }
        // Still full after the grace period: everything is paused, and polling goes on.
        guard case .wait = state.checkSpace() else { return #expect(Bool(false)) }
        let paused = state.pauseForFlow()
        #expect(paused)
        #expect(state.desiredPauses == Set(partitions))
        guard case .poll = state.checkSpace() else { return #expect(Bool(false), "paused: poll for callbacks") }
        guard case .message(_, pausesChanged: false, _) = state.take() else { return #expect(Bool(false)) }
        guard case .message(_, pausesChanged: true, _) = state.take() else { return #expect(Bool(false)) }
        // Back at half: only the caller's own pause remains.
        #expect(state.desiredPauses == [partitions[1]])
    }

    // The buffer was bounded in records only: 2,048 records of 300 KB is 600 MB.
    @Test("large records fill the buffer by bytes long before its count, and it resumes at half the bytes")
    func byteBound() {
        var state = KafkaConsumerCore.StateMachine(capacity: 2048, byteCapacity: 1_000_000)
        let partition = KafkaTopicPartition(topic: "t", partition: 0)
        state.assign([partition])
        func large(_ offset: Int64) -> KafkaConsumerMessage {
            KafkaConsumerMessage(
                topic: "t", partition: 0, offset: offset, key: [1, 2], value: Array(repeating: 0, count: 300_000))
        }
        var pushed = 0
        while case .poll = state.checkSpace() {
            _ = state.push(large(Int64(pushed)))
            pushed += 1
        }
        #expect(pushed == 4, "four 300 KB records reach 1 MB")
        #expect(state.bufferedBytes == 4 * 300_002)
        let paused = state.pauseForFlow()
        #expect(paused)
        #expect(state.desiredPauses == [partition])
        for _ in 0..<2 {
            guard case .message(_, pausesChanged: false, _) = state.take() else {
                return #expect(Bool(false), "900 KB, then 600 KB left: above half the bytes")
            }
        }
        guard case .message(_, pausesChanged: true, _) = state.take() else {
            return #expect(Bool(false), "300 KB left: at half the bytes or less, the pause lifts")
        }
        #expect(state.desiredPauses.isEmpty)
        #expect(state.bufferedBytes == 300_002)
    }

    @Test("records carry the tenure that fetched them: one fetched before a revocation is below the next assignment's")
    func recordsCarryTheirTenure() {
        var state = KafkaConsumerCore.StateMachine(capacity: 10)
        let partition = KafkaTopicPartition(topic: "t", partition: 0)
        let first = state.assign([partition])
        _ = state.push(record(0, 0))
        _ = state.assign([KafkaTopicPartition(topic: "t", partition: 1)])  // another partition joins
        _ = state.push(record(0, 1))
        guard case .message(let taken, _, _) = state.take() else { return #expect(Bool(false)) }
        #expect(taken.tenure == first)
        // The reader holds offset 0; the partition is lost (its buffered offset 1 is dropped) and
        // assigned back.
        _ = state.revoke([partition])
        #expect(state.bufferedCount == 0)
        let second = state.assign([partition])
        #expect(taken.tenure < second, "the held record belongs to the tenure that ended")
        _ = state.push(record(0, 0))
        guard case .message(let again, _, _) = state.take() else { return #expect(Bool(false)) }
        #expect(again.tenure >= second, "read again in the new tenure")
    }

    @Test("a poller held by a full buffer is woken once 64 slots are free, not at every record")
    func wakeInBatches() {
        var state = KafkaConsumerCore.StateMachine(capacity: 2048)
        state.assign([KafkaTopicPartition(topic: "t", partition: 0)])
        for offset in 0..<2048 { _ = state.push(record(0, Int64(offset))) }
        guard case .wait = state.checkSpace() else { return #expect(Bool(false), "full: the poller waits") }
        var wakes: [Int] = []
        for taken in 1...200 {
            guard case .message(_, _, let wakePoller) = state.take() else { return #expect(Bool(false)) }
            if wakePoller {
                wakes.append(taken)
                // The poller refills the buffer, then waits again.
                while state.bufferedCount < 2048 { _ = state.push(record(0, Int64(10_000 + taken))) }
                guard case .wait = state.checkSpace() else { return #expect(Bool(false)) }
            }
        }
        #expect(wakes == [64, 128, 192], "woken after these records")
    }

    @Test("a batch reader takes what is buffered without waiting; the end is left for take to report")
    func takeBuffered() {
        var state = KafkaConsumerCore.StateMachine(capacity: 10)
        for offset in 0..<3 { _ = state.push(record(0, Int64(offset))) }
        var taken: [Int64] = []
        while case .message(let message, _, _) = state.takeBuffered() { taken.append(message.offset) }
        #expect(taken == [0, 1, 2])
        guard case .empty = state.takeBuffered() else { return #expect(Bool(false), "nothing buffered: empty") }
        _ = state.push(record(0, 3))
        _ = state.finish(.closed)
        guard case .empty = state.takeBuffered() else {
            return #expect(Bool(false), "closed: the buffered record is dropped, and the end is not takeBuffered's")
        }
        guard case .finished(nil) = state.take() else { return #expect(Bool(false), "take reports the end") }
    }

    @Test("a waiting reader is woken once per poll batch, with the first record; the rest wait in the buffer")
    func handOverPerBatch() async throws {
        var rest: [Int64] = []
        let first = try await withCheckedThrowingContinuation { (waiter: KafkaConsumerCore.StateMachine.Waiter) in
            var state = KafkaConsumerCore.StateMachine(capacity: 3)
            guard case .empty = state.wait(waiter) else { return waiter.resume(returning: nil) }
            // The pushes only buffer (a per-record resume would hand this waiter over here).
            #expect(state.push(record(0, 0)) == .buffered(full: false))
            #expect(state.push(record(0, 1)) == .buffered(full: false))
            #expect(state.push(record(0, 2)) == .buffered(full: true), "full: the batch stops")
            guard let (stored, message) = state.handOver() else { return waiter.resume(returning: nil) }
            #expect(state.handOver() == nil, "one hand-over per waiter")
            while case .message(let next, _, _) = state.take() { rest.append(next.offset) }
            stored.resume(returning: message)
        }
        #expect(first?.offset == 0)
        #expect(rest == [1, 2])
    }

    @Test("revoking drops the revoked partitions' unread records and keeps the others in order")
    func revokeDropsUnread() {
        var state = KafkaConsumerCore.StateMachine(capacity: 100)
        state.assign([KafkaTopicPartition(topic: "t", partition: 0), KafkaTopicPartition(topic: "t", partition: 1)])
        for offset in 0..<3 {
            _ = state.push(record(0, Int64(offset)))
            _ = state.push(record(1, Int64(offset)))
        }
        _ = state.revoke([KafkaTopicPartition(topic: "t", partition: 0)])
        var remaining: [Int64] = []
        while case .message(let message, _, _) = state.take() {
            #expect(message.partition == 1)
            remaining.append(message.offset)
        }
        #expect(remaining == [0, 1, 2])
        #expect(state.assigned == [KafkaTopicPartition(topic: "t", partition: 1)])
    }

    @Test("closing ends the sequence; a failure ends it with the error")
    func termination() {
        var state = KafkaConsumerCore.StateMachine(capacity: 10)
        _ = state.push(record(0, 0))
        #expect(state.finish(.failed(KafkaError(code: .fatal, message: "fenced"))) == nil)
        guard case .finished(let error) = state.take() else { return #expect(Bool(false)) }
        #expect(error?.isFatal == true)
        guard case .dropped = state.push(record(0, 1)) else { return #expect(Bool(false)) }
    }

    @Test("a consumed record's topic name is shared per topic, and never another topic's")
    func topicNamesAreSharedAndExact() {
        var names = TopicNames()
        func name(_ text: String) -> String { text.withCString { names.name($0) } }
        let first = name("notifications-production")
        let again = name("notifications-production")
        #expect(first == "notifications-production" && again == first)
        // The same storage: the second record did not get a string of its own.
        let firstBytes = first.utf8.withContiguousStorageIfAvailable { $0.baseAddress }
        let againBytes = again.utf8.withContiguousStorageIfAvailable { $0.baseAddress }
        #expect(firstBytes != nil && firstBytes == againBytes)
        // Same length, one byte apart; a prefix; an empty name.
        #expect(name("notifications-productioN") == "notifications-productioN")
        #expect(name("notifications") == "notifications")
        #expect(name("") == "")
        // Short names (kept inline) are found again too, not kept once per record.
        for _ in 0..<3 { _ = (name("notifications"), name("")) }
        #expect(names.count == 4)
        // Past the cache's limit names are still right, only made afresh.
        for index in 0..<(TopicNames.limit + 10) { #expect(name("topic-\(index)") == "topic-\(index)") }
        #expect(name("notifications-production") == first)
    }

    @Test("secrets are cut out of configuration errors")
    func redaction() {
        let message = #"Invalid value "hunter2" for configuration property "sasl.password""#
        #expect(
            RDKafkaConfig.redact(message, value: "hunter2", key: "sasl.password")
                == #"Invalid value "<redacted>" for configuration property "sasl.password""#)
        #expect(RDKafkaConfig.redact(message, value: "hunter2", key: "linger.ms") == message)
    }

    @Test("error codes carry librdkafka's names and retriability")
    func errors() {
        #expect(KafkaError.Code.messageTimedOut.name == "_MSG_TIMED_OUT")
        #expect(KafkaError(code: .notLeaderForPartition, message: "").isRetriable)
        #expect(!KafkaError(code: .invalidArgument, message: "").isRetriable)
        #expect(KafkaError(code: .fatal, message: "").isFatal)
    }

    // An assigned partition that had delivered nothing (librdkafka's consumer_lag -1) had no lag
    // series at all.
    @Test("statistics give the lag of every fetched partition, one that has delivered nothing yet included")
    func statistics() throws {
        let json = """
            {"name":"c","topics":{"events":{"partitions":{
              "0":{"fetch_state":"active","consumer_lag":42,"committed_offset":100,"hi_offset":142},
              "1":{"fetch_state":"none","consumer_lag":-1,"committed_offset":-1001,"hi_offset":-1},
              "2":{"fetch_state":"active","consumer_lag":-1,"committed_offset":-1001,"hi_offset":5,"lo_offset":0},
              "3":{"fetch_state":"offset-query","consumer_lag":-1,"committed_offset":-1001,"hi_offset":0,"lo_offset":0},
              "-1":{"fetch_state":"none","consumer_lag":-1}}}}}
            """
        let stats = try #require(KafkaConsumerStatistics(json: json))
        #expect(stats.partitions.count == 3)
        let partition = try #require(stats.partitions[KafkaTopicPartition(topic: "events", partition: 0)])
        #expect(partition.consumerLag == 42 && partition.committedOffset == 100 && partition.highWatermark == 142)
        #expect(partition.lag == 42)
        #expect(stats.partitions[KafkaTopicPartition(topic: "events", partition: 2)]?.lag == 5, "from the start")
        #expect(stats.partitions[KafkaTopicPartition(topic: "events", partition: 3)]?.lag == 0, "an empty partition")
        #expect(stats.totalLag == 47)
        #expect(KafkaConsumerStatistics(json: "not json") == nil)
    }
}

@Suite("librdkafka's errors in the log")
struct KafkaErrorLoggingTests {
    // A broker that refuses connections was logged twice per attempt: librdkafka's "FAIL" log line
    // at error level and the same failure through the error callback at warning.
    @Test("a refused connection is logged once per attempt, naming the client")
    func refusedConnectionOnce() async throws {
        let log = CapturedLog()
        var configuration = KafkaConsumerConfiguration(bootstrapServers: "127.0.0.1:1", groupID: "g")
        configuration.sessionTimeout = .seconds(6)
        let consumer = try KafkaConsumer(configuration: configuration, logger: log.logger())
        try consumer.subscribe(topics: ["t"])
        try await Task.sleep(for: .milliseconds(1500))
        await consumer.close()
        let loud = log.all.filter { $0.level >= .warning && $0.message.contains("Connect to ipv4#127.0.0.1:1 failed") }
        #expect(!loud.isEmpty)
        #expect(loud.allSatisfy { $0.message.hasPrefix("Kafka error _TRANSPORT") }, "\(loud.map(\.message))")
        #expect(loud.allSatisfy { $0.metadata["kafka-client"] == "consumer" })
    }
}
