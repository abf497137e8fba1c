import Foundation
@testable import Kafka
import Testing

/// Settings as librdkafka runs with them: a property in `properties` wins over the typed field it
/// names, and the consumer's own bounds must follow what librdkafka enforces.
@Suite("Effective consumer settings", .timeLimit(.minutes(1)))
struct EffectiveSettingsTests {
    /// An assignment handler that takes `seconds`, and says when it has finished.
    final class SlowAssignment: KafkaRebalanceHandler {
        let seconds: Double
        let finished = TestLocked(false)

        init(seconds: Double) { self.seconds = seconds }

        func partitionsAssigned(_ partitions: [KafkaTopicPartition], tenure: UInt64) async {
            try? await Task.sleep(for: .seconds(seconds))
            finished.withLock { $0 = true }
        }

        func partitionsRevoked(_ partitions: [KafkaTopicPartition], lost: Bool) async {}
    }

    @Test("a rebalance handler is waited for up to max.poll.interval.ms as a property sets it, not the typed value")
    func handlerBoundFollowsTheProperty() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        let topic = uniqueName("bound")
        try cluster.createTopic(topic, partitions: 1)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        _ = try await producer.send(KafkaProducerMessage(topic: topic, value: Array("0".utf8)))
        await producer.close()

        var configuration = consumerConfiguration(cluster, group: uniqueName("g"))
        configuration.maxPollInterval = .seconds(2)  // the typed value, which this property overrides:
        configuration.properties["max.poll.interval.ms"] = "20000"
        #expect(configuration.effective.maxPollInterval == .seconds(20))
        let handler = SlowAssignment(seconds: 5)
        let consumer = try KafkaConsumer(configuration: configuration, rebalanceHandler: handler)
        try consumer.subscribe(topics: [topic])
        _ = try await read(1, from: consumer, within: 40)
        // Let go at the typed 2 s, the records of the new assignment reach the reader while its
        // handler (which sets up what those records need) still runs.
        #expect(handler.finished.withLock { $0 }, "a record was handed over before its assignment's handler finished")
        await consumer.close()
    }

    @Test("effective values are librdkafka's reading of the properties over the typed fields")
    func effectiveValues() {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: "k:9092", groupID: "g")
        #expect(configuration.effective.maxPollInterval == configuration.maxPollInterval)
        #expect(configuration.effective.clientID == "apns-worker")
        #expect(configuration.effective.groupInstanceID == nil)
        configuration.properties = [
            "session.timeout.ms": "12000", "client.id": "pod-7", "group.instance.id": "pod-7",
            "group.id": "elsewhere",
        ]
        #expect(configuration.effective.sessionTimeout == .seconds(12))
        #expect(configuration.effective.clientID == "pod-7")
        #expect(configuration.effective.groupInstanceID == "pod-7")
        #expect(
            KafkaPropertyReading.value(of: "group.id", after: configuration.librdkafkaProperties) == "g",
            "the typed group wins over a group.id property")
        var producer = KafkaProducerConfiguration(bootstrapServers: "k:9092")
        producer.properties["delivery.timeout.ms"] = "60000"  // librdkafka's other name for message.timeout.ms
        #expect(producer.effectiveDeliveryTimeout == .seconds(60))
    }
}
