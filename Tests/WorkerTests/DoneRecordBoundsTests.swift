import Foundation
import Kafka
import Logging
import TestPeers
import Testing
import Threading

@testable import Worker

@Suite("Done record bounds", .timeLimit(.minutes(1)))
struct DoneRecordBoundsUnitTests {
    @Test("past the end, or more stretches left not done than a writer could leave: refused; at the bounds: trusted")
    func bounds() {
        let bounds = DoneRecordBounds(maxInFlight: 3, maxParked: 1)
        #expect(bounds.maxGaps == 8)
        func known(_ committed: Int64, _ done: [Range<Int64>]) -> KnownProgress {
            KnownProgress(committed: committed, done: OffsetRanges(done))
        }
        #expect(bounds.refusal(of: known(5, []), end: 5) == nil, "nothing done: nothing to refuse")
        #expect(bounds.refusal(of: known(5, [6..<20]), end: 20) == nil, "up to the end")
        #expect(bounds.refusal(of: known(5, [6..<21]), end: 20) == .pastEnd)
        // 6, 8, …, 20 done: 5, 7, …, 19 left not done, 8 stretches, the bound; one more is too many.
        let alternate = stride(from: Int64(6), through: 20, by: 2).map { $0..<$0 + 1 }
        #expect(bounds.refusal(of: known(5, alternate), end: nil) == nil)
        #expect(bounds.refusal(of: known(5, alternate + [23..<24]), end: nil) == .tooManyGaps)
        // A progress record names its committed offset done too: no stretch before it.
        #expect(DoneRecordBounds.stretchesNotDone(in: known(5, [5..<6, 7..<8])) == 1)
        #expect(bounds.refusal(of: known(5, [6..<1_000_000]), end: nil) == nil, "long ranges, few gaps: trusted")
    }

    // Under read_committed an aborted transaction leaves a stretch of offsets with no record, and
    // compaction leaves many: a writer with one event in flight below such a stretch and the events
    // above it done writes one long stretch left not done, holding one record.
    @Test("a true record whose stretches left not done span offsets without records is trusted")
    func stretchesWithoutRecords() {
        let bounds = DoneRecordBounds(maxInFlight: 3, maxParked: 1)
        func known(_ committed: Int64, _ done: [Range<Int64>]) -> KnownProgress {
            KnownProgress(committed: committed, done: OffsetRanges(done))
        }
        // 5 in flight, 6 to 9,999 an aborted transaction, 10,000 on done.
        #expect(bounds.refusal(of: known(5, [10_000..<10_050]), end: 10_050) == nil)
        // Four in flight, each before a compacted stretch: four stretches, each holding one record.
        #expect(bounds.refusal(of: known(5, [900..<901, 1_900..<1_901, 2_900..<2_901]), end: nil) == nil)
    }

    // What a record leaves not done is only known in records once they are read: a record whose one
    // stretch left not done holds more records than its writer could have had unfinished names
    // offsets nobody finished above it.
    @Test("more records read inside the done ranges and not done than a writer could leave: the ranges above are run")
    func recordsReadInsideTheRanges() {
        let p0 = KafkaTopicPartition(topic: "events", partition: 0)
        var state = WorkerPipeline.StateMachine(maxInFlight: 3, maxParked: 1)  // at most 8 left not done
        let known = KnownProgress(committed: 0, done: OffsetRanges([1..<2, 20..<30]))
        _ = state.assign([p0], tenure: 1, progress: [p0: known])
        let lease = state.ownership.lease(of: p0)!
        var run: [Int64] = []
        for offset in Int64(0)..<30 {
            guard case .run = state.admit(p0, offset: offset, lease: lease) else { continue }
            run.append(offset)
            _ = state.finish(p0, offset: offset, lease: lease)
        }
        #expect(!run.contains(1), "below the records that show it untrue, a done record is still taken as done")
        #expect(run == [0] + Array(2..<30), "0 and 2 to 19 not done inside it: 20 to 29 are run")
    }

    // Tansu's ListOffsets answers one past the first offset of the last batch: a done record that
    // reaches into that batch is true, and its end is the one the fetch reports.
    @Test("on Tansu the end a done record is checked against is the fetch's, not ListOffsets'")
    func endOnTansu() async throws {
        let tansu = try await TansuBroker.start()
        defer { Task { await tansu.shutdown() } }
        try await tansu.createTopic("events", partitions: 1)
        var configuration = KafkaProducerConfiguration(bootstrapServers: tansu.bootstrapServers)
        configuration.linger = .milliseconds(50)  // one batch
        let producer = try KafkaProducer(configuration: configuration)
        for index in 0..<20 {
            try await producer.send(KafkaProducerMessage(topic: "events", value: Array("\(index)".utf8))) { _ in }
        }
        try await producer.flush(timeout: .seconds(30))
        await producer.close()
        let settings = KafkaConsumerConfiguration(bootstrapServers: tansu.bootstrapServers, groupID: "ends")
        let consumer = try KafkaConsumer(configuration: settings)
        let partition = KafkaTopicPartition(topic: "events", partition: 0)
        let listed = try await consumer.watermarks(of: partition).high
        let ends = Locked<[KafkaTopicPartition: Int64]>([:])
        await PartitionEnds.learn(
            [partition: 19], consumer: consumer, reader: settings, until: .now + .seconds(10),
            logger: Logger(label: "test")
        ) { partition, end in ends.withLock { $0[partition] = end } }
        await consumer.close()
        #expect(listed < 20, "ListOffsets on Tansu: \(listed)")
        #expect(ends.withLock { $0[partition] } == 20)
    }
}
