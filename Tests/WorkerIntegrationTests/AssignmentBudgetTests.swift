import Foundation
import Kafka
import Logging
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// An assignment reads its partitions' done records within a budget (a quarter of
/// `max.poll.interval.ms`, at most 30 s): what did not come in time is run again. A broker that is
/// slow to answer for one partition costs that partition's done records, not every partition's.
@Suite("Assignment budget: a slow partition costs only its own done records", .serialized, .timeLimit(.minutes(3)))
struct AssignmentBudgetTests {
    static let records = 5

    @Test("one partition's leader slow past the budget: only that partition's done records are pushed again")
    func slowLeader() async throws {
        var logger = Logger(label: "integration")
        logger.logLevel =
            Logger.Level(rawValue: ProcessInfo.processInfo.environment["INTEGRATION_LOG"] ?? "") ?? .critical
        let cluster = try KafkaMockCluster(brokers: 2, logger: logger)
        let stack = try await EmbeddedStack.start(partitions: 4, kafka: cluster, logger: logger)
        let harness = Harness(stack: stack, logger: logger, broker: .mock, tansu: nil)
        defer { Task { await harness.shutdown() } }
        let group = "budget"
        // Everything on broker 1 but input partition 3, whose leader (broker 2) turns slow below.
        for topic in [EmbeddedStack.inputTopic, EmbeddedStack.resultsTopic] {
            for partition in Int32(0)..<4 {
                try cluster.setLeader(
                    topic: topic, partition: partition,
                    broker: topic == EmbeddedStack.inputTopic && partition == 3 ? 2 : 1)
            }
        }
        for topic in [EmbeddedStack.deadLetterTopic, EmbeddedStack.progressTopic] {
            try cluster.setLeader(topic: topic, partition: 0, broker: 1)
        }
        for name in [group, group + "-probe"] { try cluster.setGroupCoordinator(group: name, broker: 1) }

        // Five alerts a partition; each partition's offset 0 committed with 1 to 4 done above it.
        var messages: [KafkaProducerMessage] = []
        for partition in Int32(0)..<4 {
            for index in 0..<Self.records {
                let token = Samples.deviceToken(Int(partition) * Self.records + index)
                stack.simulator.devices.register(token)
                messages.append(
                    Samples.alert(id: UUID().uuidString.lowercased(), deviceToken: token, partition: partition))
            }
        }
        try await harness.produce(messages)
        let committer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group),
            logger: logger)
        let metadata = CommitMetadata(committed: 0, done: OffsetRanges([1..<Int64(Self.records)])).encoded().text
        try await committer.commit(
            (Int32(0)..<4).map {
                KafkaTopicPartitionOffset(
                    KafkaTopicPartition(topic: EmbeddedStack.inputTopic, partition: $0), offset: 0, metadata: metadata)
            })
        await committer.close()

        // A budget of 2 s (max.poll.interval.ms 8 s); broker 2 answers each request after 5 s.
        try cluster.setRoundTripTime(broker: 2, .seconds(5))
        let worker = try harness.startWorker(group: group) { configuration in
            configuration.delivery.revocationTimeout = .seconds(1)
            configuration.consumer.properties["max.poll.interval.ms"] = "8000"
        }
        // The results of the events that had to run (and of any run again), then broker 2 quick again.
        _ = try await harness.results(3 + Self.records)
        try cluster.setRoundTripTime(broker: 2, .zero)
        try await eventually(60, "offsets committed to the end") {
            try await harness.commitProgress(group: group).allSatisfy { $0.committed == $0.end }
        }
        try await worker.stop()
        let pushed = try await harness.allRecords(of: EmbeddedStack.resultsTopic).map { try ResultRecord($0) }
        var offsets: [Int: [Int64]] = [:]
        for result in pushed { offsets[result.sourcePartition, default: []].append(result.sourceOffset) }
        for partition in 0..<3 {
            #expect(offsets[partition]?.sorted() == [0], "partition \(partition): its done records were run again")
        }
        #expect(offsets[3]?.sorted() == Array(0..<Int64(Self.records)), "the slow partition's run again")
        #expect(stack.simulator.observation.records.count == 3 + Self.records)
    }
}
