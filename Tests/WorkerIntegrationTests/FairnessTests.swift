import APNs
import Foundation
import Kafka
import NIOConcurrencyHelpers
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// Fairness between apps: one credential whose pushes all wait holds only its share of the
/// in-flight bound; the other apps' events go on.
@Suite("Fairness between apps: a credential over its share waits parked", .serialized, .timeLimit(.minutes(5)))
struct FairnessTests {
    static let stuckTopic = "com.example.stuck"
    static let healthyTopic = "com.example.healthy"

    /// Two credentials, one per topic. APNs never answers the stuck app (a black-holed connection)
    /// until `releaseStuck()`; it answers the healthy one at once. Counts every push.
    final class TwoAppSender: NotificationSending {
        private let stuck = NIOLockedValueBox<[NotificationRequest]>([])
        private let pushes = NIOLockedValueBox<[String: Int]>([:])

        func send(_ requests: [NotificationRequest]) {
            for request in requests {
                pushes.withLockedValue { $0[request.push.topic, default: 0] += 1 }
                if request.push.topic == FairnessTests.stuckTopic {
                    stuck.withLockedValue { $0.append(request) }
                } else {
                    request.completion(LostAssignmentTests.HoldingSender.delivered)
                }
            }
        }

        func credential(forTopic topic: String, environment: APNsEnvironment) -> String? {
            topic == FairnessTests.stuckTopic ? "stuck" : "healthy"
        }

        var stuckWaiting: Int { stuck.withLockedValue { $0.count } }
        func pushed(_ topic: String) -> Int { pushes.withLockedValue { $0[topic, default: 0] } }

        func releaseStuck() {
            let waiting = stuck.withLockedValue { held in
                defer { held = [] }
                return held
            }
            for request in waiting { request.completion(LostAssignmentTests.HoldingSender.delivered) }
        }

        func shutdown() async { releaseStuck() }
    }

    // Without shares, the stuck app's first 20 events filled the in-flight bound and input was held
    // for every app: the healthy app's 100 events waited for an APNs that never answered the other.
    @Test(
        "an app whose pushes never come back holds only its share: every other app's event is delivered meanwhile, then all end once, pushed once"
    )
    func stuckAppSlowsOnlyItself() async throws {
        let harness = try await Harness.start(partitions: 2)
        defer { Task { await harness.shutdown() } }
        // One partition mixes both apps, the stuck app's events first on each.
        var events: [KafkaProducerMessage] = []
        for index in 0..<100 {
            events.append(
                DeliveryUnderFailureTests.event(
                    "stuck-\(index)", token: index + 1, topic: Self.stuckTopic, partition: Int32(index % 2)))
        }
        for index in 0..<100 {
            events.append(
                DeliveryUnderFailureTests.event(
                    "healthy-\(index)", token: 1000 + index, topic: Self.healthyTopic, partition: Int32(index % 2)))
        }
        try await harness.produce(events)

        let sender = TwoAppSender()
        let configuration = try harness.stack.configuration(group: "fairness")
        var pipelineConfiguration = PipelineConfiguration(
            inputTopics: configuration.consumer.topics, resultsTopic: configuration.topics.results,
            deadLetterTopic: configuration.topics.deadLetters)
        pipelineConfiguration.maxInFlight = 20
        pipelineConfiguration.maxInFlightPerCredential = 10
        // Room for the 90 that park, but under twice that: a hold for the in-flight bound ends at half
        // of it whatever is parked (it waited for parked events to fall to half of their own bound).
        pipelineConfiguration.maxParked = 150
        let pipeline = WorkerPipeline(
            configuration: pipelineConfiguration, consumer: configuration.kafkaConsumerConfiguration,
            producer: configuration.kafkaProducerConfiguration, sender: sender, logger: harness.logger)
        let run = Task { try await pipeline.run() }
        defer { sender.releaseStuck() }

        try await eventually(60, "the healthy app's 100 results while the stuck app waits") {
            let ids = try await harness.allRecords(of: EmbeddedStack.resultsTopic).compactMap {
                try ResultRecord($0).eventID
            }
            return ids.filter { $0.hasPrefix("healthy-") }.count == 100
        }
        #expect(sender.stuckWaiting == 10, "the stuck app holds its share of the bound, no more")
        #expect(sender.pushed(Self.stuckTopic) == 10, "the rest of its events wait parked, unsent")

        sender.releaseStuck()
        // Parked ones start as the stuck app's events end; those still parked reach APNs in turn.
        try await eventually(60, "every event's result") {
            if sender.stuckWaiting > 0 { sender.releaseStuck() }
            return try await harness.allRecords(of: EmbeddedStack.resultsTopic).count >= 200
        }
        pipeline.beginShutdown()
        try await run.value

        let results = try await harness.allRecords(of: EmbeddedStack.resultsTopic)
        #expect(results.count == 200, "one result per event (\(results.count))")
        #expect(sender.pushed(Self.stuckTopic) == 100 && sender.pushed(Self.healthyTopic) == 100, "each pushed once")
        #expect(pipeline.inFlight == 0)
    }
}
