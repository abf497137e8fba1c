import Foundation
import Kafka
import Testing

@testable import Worker

/// `consumer.groupProtocol` and what it allows in `kafka:` and `consumer.properties`; a static
/// member's id (`group.instance.id`) Kafka would refuse. Each refused before any record is read.
@Suite("Configuration: the consumer group protocol and static membership")
struct ConfigurationGroupProtocolTests {
    /// The minimal file with `consumer` lines added under `consumer:` (from line 5) and `kafka`
    /// lines under `kafka:` (from line 3).
    static func yaml(consumer: String = "", kafka: String = "") -> String {
        func indented(_ text: String) -> String {
            text.split(separator: "\n").map { "  " + $0 + "\n" }.joined()
        }
        return ConfigurationFixtures.minimalYAML
            .replacingOccurrences(
                of: "  topics: [notifications]\n", with: "  topics: [notifications]\n" + indented(consumer)
            )
            .replacingOccurrences(
                of: "  bootstrap.servers: \"kafka-0:9092\"\n",
                with: "  bootstrap.servers: \"kafka-0:9092\"\n" + indented(kafka))
    }

    func errors(_ text: String, environment: [String: String] = [:]) -> [String] {
        ConfigurationFixtures.errors(text, environment: environment)
    }

    @Test("the default is the classic protocol; consumer is taken and leaves the broker's settings out")
    func choice() throws {
        let classic = try WorkerConfiguration.parse(Self.yaml(), file: "worker.yaml", environment: [:])
        #expect(classic.consumer.groupProtocol == .classic)
        let chosen = try WorkerConfiguration.parse(
            Self.yaml(consumer: "groupProtocol: consumer"), file: "worker.yaml", environment: [:])
        #expect(chosen.consumer.groupProtocol == .consumer)
        let properties = Dictionary(chosen.kafkaConsumerConfiguration.librdkafkaProperties, uniquingKeysWith: { $1 })
        #expect(properties["group.protocol"] == "consumer")
        #expect(properties["session.timeout.ms"] == nil)
        #expect(properties["partition.assignment.strategy"] == nil)
        let fromEnvironment = try WorkerConfiguration.parse(
            Self.yaml(), file: "worker.yaml", environment: ["APNS_WORKER_CONSUMER_GROUP_PROTOCOL": "consumer"])
        #expect(fromEnvironment.consumer.groupProtocol == .consumer)
        #expect(
            errors(Self.yaml(consumer: "groupProtocol: cooperative"))
                == ["worker.yaml:5: consumer.groupProtocol: expected one of classic, consumer, found \"cooperative\""])
    }

    @Test("under the consumer protocol, what the broker owns is refused at its line with where to set it instead")
    func brokerOwnedRefused() {
        let found = errors(
            Self.yaml(
                consumer:
                    "groupProtocol: consumer\nproperties:\n  session.timeout.ms: \"10000\"\n  heartbeat.interval.ms: \"500\"",
                kafka: "partition.assignment.strategy: range"))
        #expect(
            Set(found) == [
                "worker.yaml:3: kafka.partition.assignment.strategy: consumer.groupProtocol is consumer (line 6), which leaves partition.assignment.strategy to the broker; librdkafka refuses the consumer when it is set at all: remove it and set group.remote.assignor (uniform or range; every assignor of this protocol is sticky)",
                "worker.yaml:9: consumer.properties.heartbeat.interval.ms: consumer.groupProtocol is consumer (line 6), which leaves heartbeat.interval.ms to the broker; librdkafka refuses the consumer when it is set at all: remove it and set the broker's group.consumer.heartbeat.interval.ms (5 s unless set)",
                "worker.yaml:8: consumer.properties.session.timeout.ms: consumer.groupProtocol is consumer (line 6), which leaves session.timeout.ms to the broker; librdkafka refuses the consumer when it is set at all: remove it and set the broker's group.consumer.session.timeout.ms (45 s unless the broker or the group sets another)",
            ], "\(found)")
        #expect(found.count == 3, "\(found)")

        // The protocol chosen by a variable: the error says so.
        let byVariable = errors(
            Self.yaml(kafka: "session.timeout.ms: \"10000\""),
            environment: ["APNS_WORKER_CONSUMER_GROUP_PROTOCOL": "consumer"])
        #expect(
            byVariable == [
                "worker.yaml:3: kafka.session.timeout.ms: consumer.groupProtocol is consumer (set by APNS_WORKER_CONSUMER_GROUP_PROTOCOL), which leaves session.timeout.ms to the broker; librdkafka refuses the consumer when it is set at all: remove it and set the broker's group.consumer.session.timeout.ms (45 s unless the broker or the group sets another)"
            ])
        // The same under the classic protocol is taken.
        #expect(errors(Self.yaml(kafka: "session.timeout.ms: \"10000\"")) == [])
    }

    @Test("group.protocol has one source, consumer.groupProtocol, wherever it is written")
    func oneSource() {
        #expect(
            errors(Self.yaml(kafka: "group.protocol: consumer")) == [
                "worker.yaml:3: kafka.group.protocol: set consumer.groupProtocol instead: it is this property's one source, because the worker leaves out of librdkafka's configuration what the broker owns under the next-generation protocol, and the progress topic's readers and check's probe follow consumer.groupProtocol"
            ])
        let fromProperties = errors(Self.yaml(consumer: "properties: { group.protocol: consumer }"))
        #expect(
            fromProperties.count == 1
                && fromProperties[0].contains("consumer.properties.group.protocol: set consumer.groupProtocol instead"),
            "\(fromProperties)")
        let fromEnvironment = errors(Self.yaml(), environment: ["APNS_WORKER_KAFKA_GROUP_PROTOCOL": "consumer"])
        #expect(
            fromEnvironment.count == 1
                && fromEnvironment[0].hasPrefix(
                    "APNS_WORKER_KAFKA_GROUP_PROTOCOL: kafka.group.protocol: set consumer.groupProtocol instead"),
            "\(fromEnvironment)")
    }

    @Test("group.remote.assignor under the classic protocol is refused: nothing would read it")
    func remoteAssignorUnderClassic() {
        #expect(
            errors(Self.yaml(kafka: "group.remote.assignor: uniform")) == [
                "worker.yaml:3: kafka.group.remote.assignor: only the next-generation group protocol reads it, and consumer.groupProtocol is classic (the default): set consumer.groupProtocol: consumer, or use partition.assignment.strategy"
            ])
        #expect(errors(Self.yaml(consumer: "groupProtocol: consumer", kafka: "group.remote.assignor: uniform")) == [])
    }

    @Test("an instance id Kafka would refuse is refused at its line; with lanes, the urgent member's suffix counts")
    func instanceID() {
        #expect(
            errors(Self.yaml(kafka: "group.instance.id: \"worker 0\"")) == [
                "worker.yaml:3: kafka.group.instance.id: ' ' is not allowed in an instance id: Kafka takes only ASCII letters, digits, '.', '_' and '-'"
            ])
        #expect(
            errors(Self.yaml(), environment: ["APNS_WORKER_KAFKA_GROUP_INSTANCE_ID": "pod/0"]) == [
                "APNS_WORKER_KAFKA_GROUP_INSTANCE_ID: kafka.group.instance.id: '/' is not allowed in an instance id: Kafka takes only ASCII letters, digits, '.', '_' and '-'"
            ])
        #expect(
            errors(Self.yaml(kafka: "group.instance.id: \"..\"")).first?.contains("is not an instance id Kafka takes")
                == true)
        let long = String(repeating: "a", count: 245)
        #expect(errors(Self.yaml(kafka: "group.instance.id: \(long)")) == [])
        let withLanes = Self.yaml(
            consumer: "lanes: { urgent: { topics: [signin] } }", kafka: "group.instance.id: \(long)"
        )
        .replacingOccurrences(of: "topics: [notifications]", with: "topics: [notifications, signin]")
        #expect(
            errors(withLanes) == [
                "worker.yaml:3: kafka.group.instance.id: 245 characters, and Kafka takes at most 242 here (the urgent lane's member adds \"-urgent\" to it)"
            ])
        #expect(errors(Self.yaml(kafka: "group.instance.id: apns-worker-0")) == [])
    }
}
