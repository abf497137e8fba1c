import Foundation
import Testing

@testable import Worker

@Suite("Configuration: lanes (urgent topics before bulk)")
struct ConfigurationLaneTests {
    /// The minimal file with input topics `topics` and `lanes` (indented under `consumer:`), from its
    /// line 5 on.
    static func yaml(_ lanes: String, topics: String = "[campaigns, signin, chat]") -> String {
        let indented = lanes.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }
        return ConfigurationFixtures.minimalYAML.replacingOccurrences(
            of: "  topics: [notifications]\n", with: "  topics: \(topics)\n" + indented.joined(separator: "\n") + "\n")
    }

    func failure(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> ConfigurationError {
        do {
            _ = try WorkerConfiguration.parse(text, file: "worker.yaml", environment: [:])
        } catch {
            return error
        }
        Issue.record("expected an error", sourceLocation: sourceLocation)
        throw CancellationError()
    }

    @Test("without lanes every input topic is bulk, as before")
    func noLanes() throws {
        let configuration = try WorkerConfiguration.parse(Self.yaml(""), file: "worker.yaml", environment: [:])
        #expect(configuration.consumer.urgent == nil)
        #expect(configuration.consumer.bulkTopics == ["campaigns", "signin", "chat"])
    }

    @Test("urgent topics are their lane, with their own in-flight bound and APNs connections; the rest is bulk")
    func urgentLane() throws {
        let text = Self.yaml(
            "lanes:\n  urgent:\n    topics: [signin, chat]\n    maxInFlight: 200\n    connectionsPerCredential: 2")
        let configuration = try WorkerConfiguration.parse(text, file: "worker.yaml", environment: [:])
        #expect(configuration.consumer.urgent?.topics == ["signin", "chat"])
        #expect(configuration.consumer.urgent?.maxInFlight == 200)
        #expect(configuration.consumer.urgent?.connectionsPerCredential == 2)
        #expect(configuration.consumer.bulkTopics == ["campaigns"])
        #expect(
            ConfigurationCheck.summary(configuration)[1].contains(
                "urgent lane signin, chat (200 in flight, 2 APNs connections per credential), bulk lane campaigns"))

        let defaults = try WorkerConfiguration.parse(
            Self.yaml("lanes:\n  urgent:\n    topics: signin\n  bulk:\n    topics: [campaigns, chat]"),
            file: "worker.yaml", environment: [:])
        #expect(defaults.consumer.urgent?.maxInFlight == UrgentLane.defaultMaxInFlight)
        #expect(defaults.consumer.urgent?.connectionsPerCredential == 1)
        #expect(defaults.consumer.bulkTopics == ["campaigns", "chat"])
    }

    @Test("an urgent topic that is not an input topic is refused with its line")
    func urgentTopicNotAnInput() throws {
        let error = try failure(Self.yaml("lanes:\n  urgent:\n    topics: [signin, logins]"))
        #expect(
            error.description
                == "worker.yaml:7: consumer.lanes.urgent.topics: \"logins\" is not an input topic: a lane's topics are some of consumer.topics"
        )
    }

    @Test("a topic named in two lanes is refused with its line")
    func topicInTwoLanes() throws {
        let error = try failure(
            Self.yaml("lanes:\n  urgent:\n    topics: [signin]\n  bulk:\n    topics: [campaigns, chat, signin]"))
        #expect(
            error.description
                == "worker.yaml:9: consumer.lanes.bulk.topics: \"signin\" is also in consumer.lanes.urgent: a topic is in one lane"
        )
    }

    @Test("a lane with no topics is refused with its line")
    func laneWithoutTopics() throws {
        let empty = try failure(Self.yaml("lanes:\n  urgent:\n    topics: []"))
        #expect(empty.description == "worker.yaml:7: consumer.lanes.urgent.topics: a lane needs at least one topic")
        let missing = try failure(Self.yaml("lanes:\n  urgent:\n    maxInFlight: 10"))
        #expect(missing.keyPath == "consumer.lanes.urgent.topics")
        #expect(missing.code == .missingKey)
        #expect(missing.line == 6)
    }

    @Test("an explicit bulk lane must take every input topic the urgent lane leaves")
    func inputTopicInNoLane() throws {
        let error = try failure(Self.yaml("lanes:\n  urgent:\n    topics: [signin]\n  bulk:\n    topics: [campaigns]"))
        #expect(
            error.description
                == "worker.yaml:9: consumer.lanes.bulk.topics: input topic \"chat\" is in no lane: name it in consumer.lanes.urgent.topics or here"
        )
    }

    @Test("every input topic urgent leaves no bulk lane: refused")
    func everythingUrgent() throws {
        let error = try failure(Self.yaml("lanes:\n  urgent:\n    topics: [signin]", topics: "[signin]"))
        #expect(error.keyPath == "consumer.lanes.urgent")
        #expect(error.line == 6)
    }

    @Test("an unknown lane is refused")
    func unknownLane() throws {
        let error = try failure(Self.yaml("lanes:\n  urgent:\n    topics: [signin]\n  express:\n    topics: [chat]"))
        #expect(error.keyPath == "consumer.lanes.express")
        #expect(error.code == .unknownKey)
    }
}
