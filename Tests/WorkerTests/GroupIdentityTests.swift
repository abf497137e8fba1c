import Foundation
import Kafka
import TestPeers
import Testing

@testable import Worker

/// The consumer group has one source, `consumer.group`: a `group.id` written under `kafka:` or
/// `consumer.properties`, or given through the environment, must neither move `check`'s probe into
/// the worker's own group (where the worker then took the probe's done record for its own and never
/// pushed an event) nor put every replay cursor into one group.
@Suite("One source for the consumer group", .timeLimit(.minutes(2)))
struct GroupIdentityTests {
    /// Every way a `group.id` could reach librdkafka besides `consumer.group`.
    static let overrides: [(name: String, kafka: [String: String], consumer: String, environment: [String: String])] = [
        ("kafka", ["group.id": "fresh-group"], "", [:]),
        ("consumer.properties", [:], "\n  properties: {group.id: fresh-group}", [:]),
        ("the environment", [:], "", ["APNS_WORKER_KAFKA_GROUP_ID": "fresh-group"]),
    ]

    @Test(
        "check never commits into the group a worker reads, however group.id is given, and says where to set it",
        arguments: 0..<overrides.count)
    func checkStaysOutOfTheWorkersGroup(_ index: Int) async throws {
        let (name, kafka, consumer, environment) = Self.overrides[index]
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["notifications", "apns-results", "apns-dead-letters"] {
            try cluster.createTopic(topic, partitions: 1)
        }
        let key = try await ConfigurationCheckTests.keyFile()
        let text = ConfigurationCheckTests.configuration(servers: cluster.bootstrapServers, keyFile: key, kafka: kafka)
            .replacingOccurrences(of: "topics: [notifications]", with: "topics: [notifications]" + consumer)
        let check = await ConfigurationCheck.run(
            path: try ConfigurationCheckTests.write(text), environment: environment)

        let partition = KafkaTopicPartition(topic: "notifications", partition: 0)
        let reader = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: "fresh-group"))
        let committed = try await reader.committed([partition])
        await reader.close()
        #expect(committed[partition] == nil, "\(name): check committed \(String(describing: committed[partition]))")
        #expect(!check.isValid, "\(name): group.id must be refused")
        #expect(
            check.problems.contains { $0.contains("group.id") && $0.contains("consumer.group") },
            "\(name): \(check.problems)")
    }

    @Test("what check commits to find out whether the broker keeps commit metadata is never read as done records")
    func probeIsNotProgress() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["notifications", "apns-results", "apns-dead-letters"] {
            try cluster.createTopic(topic, partitions: 1)
        }
        let key = try await ConfigurationCheckTests.keyFile()
        let path = try ConfigurationCheckTests.write(
            ConfigurationCheckTests.configuration(servers: cluster.bootstrapServers, keyFile: key))
        let check = await ConfigurationCheck.run(path: path, environment: [:])
        #expect(check.isValid, "\(check.problems)")
        #expect(check.summary.contains { $0.contains("the broker keeps commit metadata") }, "\(check.summary)")

        // Whatever group the probe went to, a worker that read it would find no done record there.
        let partition = KafkaTopicPartition(topic: "notifications", partition: 0)
        let configuration = try WorkerConfiguration.load(path: path, environment: [:])
        let reader = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers,
                groupID: CommitMetadataProbe.group(configuration.consumer.group)))
        let probe = try #require(try await reader.committed([partition])[partition], "the probe committed nothing")
        await reader.close()
        let text = try #require(probe.metadata)
        #expect(throws: CommitMetadata.Problem.self, "the probe's metadata reads as done records: \(text)") {
            try CommitMetadata.decode(text, committed: probe.offset)
        }
    }

    @Test("replay keeps a cursor per reason even when its Kafka settings carry a group.id of their own")
    func replayCursorsStayApart() async throws {
        let (cluster, plain) = try await ReplayRunTests.deadLetterTopic(
            reasons: ["schema", "schema", "malformed-json"])
        var replayer = plain
        replayer.consumerConfiguration.properties["group.id"] = "shared"
        var schema = ReplayRequest(deadLetterTopic: "dlq")
        schema.reasons = [.schema]
        #expect(try await replayer.run(schema).count(.replayed) == 2)
        var malformed = ReplayRequest(deadLetterTopic: "dlq")
        malformed.reasons = [.malformedJSON]
        malformed.dryRun = true
        let report = try await replayer.run(malformed)
        #expect(report.scanned == 3, "the malformed-json cursor was the schema one's: \(report.table)")
        #expect(report.count(.wouldReplay) == 1, "\(report.table)")
        withExtendedLifetime(cluster) {}
    }
}

/// A setting the worker's configuration has a key for is set there only; the rest of librdkafka's
/// settings pass through, and the worker's own bounds follow what librdkafka reads.
@Suite("Properties the worker sets itself")
struct OwnedPropertyTests {
    @Test(
        "group.id and the producer's message timeout, under any of librdkafka's names, point at their keys with a line")
    func ownedKeysAreRefused() throws {
        let cases: [(property: String, section: String, key: String)] = [
            ("group.id", "kafka", "consumer.group"),
            ("message.timeout.ms", "producer.properties", "producer.deliveryTimeout"),
            ("delivery.timeout.ms", "kafka", "producer.deliveryTimeout"),
        ]
        for (property, section, key) in cases {
            let text: String
            if section == "kafka" {
                text = ConfigurationFixtures.minimalYAML.replacingOccurrences(
                    of: "  bootstrap.servers: \"kafka-0:9092\"",
                    with: "  bootstrap.servers: \"kafka-0:9092\"\n  \(property): \"60000\"")
            } else {
                text = ConfigurationFixtures.minimalYAML + "\nproducer:\n  properties:\n    \(property): \"60000\"\n"
            }
            do {
                _ = try WorkerConfiguration.parse(text, file: "worker.yaml")
                Issue.record("\(property) in \(section) was taken")
            } catch {
                #expect(error.keyPath == "\(section).\(property)", "\(error)")
                #expect(error.line != nil && error.description.hasPrefix("worker.yaml:"), "\(error)")
                #expect(error.description.contains("set \(key) instead"), "\(error)")
            }
        }
    }

    @Test("a property that sets max.poll.interval.ms is what the revocation bound is checked against and bounds on")
    func pollIntervalFromAProperty() throws {
        let text =
            ConfigurationFixtures.minimalYAML.replacingOccurrences(
                of: "  bootstrap.servers: \"kafka-0:9092\"",
                with: "  bootstrap.servers: \"kafka-0:9092\"\n  max.poll.interval.ms: \"600000\"")
            + "\ndelivery:\n  revocationTimeout: 200s\n"
        let configuration = try WorkerConfiguration.parse(text)
        #expect(configuration.kafkaConsumerConfiguration.effective.maxPollInterval == .seconds(600))
        let pipeline = WorkerPipeline(
            configuration: PipelineConfiguration(
                inputTopics: ["notifications"], resultsTopic: "r", deadLetterTopic: "d"),
            consumer: configuration.kafkaConsumerConfiguration,
            producer: configuration.kafkaProducerConfiguration, sender: EventProcessorTests.ScriptedSender([]))
        #expect(pipeline.maxPollInterval == .seconds(600))
    }

    @Test("the urgent lane's member is named apart whether client.id and group.instance.id come from kafka or consumer")
    func urgentMemberNamedApart() {
        var consumer = KafkaConsumerConfiguration(bootstrapServers: "k:9092", groupID: "pushers")
        consumer.properties = ["client.id": "pod-3", "group.instance.id": "pod-3"]
        let urgent = WorkerRuntime.urgentMember(consumer).effective
        #expect(urgent.clientID == "pod-3-urgent")
        #expect(urgent.groupInstanceID == "pod-3-urgent")
        let plain = WorkerRuntime.urgentMember(KafkaConsumerConfiguration(bootstrapServers: "k:9092", groupID: "g"))
        #expect(plain.effective.clientID == "apns-worker-urgent")
        #expect(plain.effective.groupInstanceID == nil)
    }
}
