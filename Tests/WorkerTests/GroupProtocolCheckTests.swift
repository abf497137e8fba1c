import Foundation
import Kafka
import Testing

@testable import Worker

/// `check --strict` says whether the broker speaks the group protocol chosen: a broker without the
/// next-generation protocol gives a joining member no error, only no partitions.
@Suite("check --strict: the broker's group protocol", .timeLimit(.minutes(2)))
struct GroupProtocolCheckTests {
    func check(groupProtocol: String?, withdrawn: Bool) async throws -> ConfigurationCheck {
        let cluster = try KafkaMockCluster(brokers: 1)
        if withdrawn { try cluster.withdraw(.consumerGroupHeartbeat) }
        for topic in ["notifications", "apns-results", "apns-dead-letters"] {
            try cluster.createTopic(topic, partitions: 2)
        }
        var text = ConfigurationCheckTests.configuration(
            servers: cluster.bootstrapServers, keyFile: try await ConfigurationCheckTests.keyFile())
        if let groupProtocol {
            text = text.replacingOccurrences(
                of: "  topics: [notifications]", with: "  topics: [notifications]\n  groupProtocol: \(groupProtocol)")
        }
        // 15 s, not the 60 s patience of checks against a live broker: the mock cluster does not answer
        // DescribeConfigs, so strict's replication check waits the whole time-out for nothing; the
        // protocol probe needs about 5 s of it.
        return await ConfigurationCheck.run(
            path: try ConfigurationCheckTests.write(text), environment: [:],
            brokerTimeout: .seconds(15), strict: true, probesAPNs: false)
    }

    @Test("the next-generation protocol on a broker that speaks it: said in the summary")
    func supported() async throws {
        let check = try await check(groupProtocol: "consumer", withdrawn: false)
        #expect(
            check.summary.contains {
                $0.contains("next-generation protocol: the group coordinator answered ConsumerGroupHeartbeat")
            }, "\(check.summary)")
        #expect(!check.problems.contains { $0.contains("groupProtocol") }, "\(check.problems)")
    }

    @Test("the next-generation protocol on a broker without it: a problem at the key's line, with what to do")
    func unsupported() async throws {
        let check = try await check(groupProtocol: "consumer", withdrawn: true)
        #expect(!check.isValid)
        let problem = try #require(check.problems.first { $0.contains("groupProtocol") }, "\(check.problems)")
        #expect(
            problem.contains(".yaml:6: consumer.groupProtocol: the broker's group coordinator does not speak"),
            "\(problem)")
        #expect(problem.contains("would join and never be given a partition"), "\(problem)")
        #expect(problem.contains("set consumer.groupProtocol: classic, or upgrade the broker"), "\(problem)")
    }

    @Test("the classic protocol: every broker speaks it, no probe is made")
    func classic() async throws {
        let check = try await check(groupProtocol: nil, withdrawn: true)
        #expect(check.summary.contains { $0.contains("classic protocol (every broker speaks it)") }, "\(check.summary)")
        #expect(!check.problems.contains { $0.contains("groupProtocol") }, "\(check.problems)")
    }
}
