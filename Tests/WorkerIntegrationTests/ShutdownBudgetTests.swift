import Foundation
import Kafka
import NIOConcurrencyHelpers
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// One deadline bounds a shutdown, whatever is under way when it begins: Kubernetes kills the pod
/// at the end of its grace period, and a kill pushes again what was not committed.
@Suite("Shutdown within its budget", .serialized, .timeLimit(.minutes(3)))
struct ShutdownBudgetTests {
    /// Counts the revocations the pipeline reports as they begin.
    final class RevocationObserver: PipelineObserver {
        private let count = NIOLockedValueBox(0)
        var revocations: Int { count.withLockedValue { $0 } }
        func partitionsRevoked(_ partitions: [KafkaTopicPartition]) { count.withLockedValue { $0 += 1 } }
    }

    @Test(
        "a shutdown that begins while a revocation waits for a black-holed APNs ends within shutdownTimeout, not the revocation's bound"
    )
    func shutdownDuringARevocation() async throws {
        let harness = try await Harness.start(partitions: 2)
        defer { Task { await harness.shutdown() } }
        let events = 10
        try await harness.produce(
            (0..<events).map {
                DeliveryUnderFailureTests.event("event-\($0)", token: $0 + 1, partition: Int32($0 % 2))
            })
        // APNs answers nothing: every event waits at APNs until the sender is shut down.
        let sender = LostAssignmentTests.HoldingSender(holding: Set((1...events).map { Samples.deviceToken($0) }))
        let observer = RevocationObserver()
        let group = "shutdown-budget"
        let configuration = try harness.stack.configuration(group: group)
        var pipelineConfiguration = PipelineConfiguration(
            inputTopics: configuration.consumer.topics, resultsTopic: configuration.topics.results,
            deadLetterTopic: configuration.topics.deadLetters)
        pipelineConfiguration.revocationTimeout = .seconds(120)
        let shutdownTimeout = Duration.seconds(6)
        pipelineConfiguration.shutdownTimeout = shutdownTimeout
        let pipeline = WorkerPipeline(
            configuration: pipelineConfiguration, consumer: configuration.kafkaConsumerConfiguration,
            producer: configuration.kafkaProducerConfiguration, sender: sender, observer: observer,
            logger: harness.logger)
        let run = Task { try await pipeline.run() }
        defer { sender.releaseHeld() }
        try await eventually(60, "every event at APNs") { sender.waitingCount == events }

        // A second member joins: the group takes a partition from the worker, whose revocation waits
        // (up to its 120 s bound) for that partition's events at APNs.
        let other = try KafkaConsumer(configuration: configuration.kafkaConsumerConfiguration)
        try other.subscribe(topics: configuration.consumer.topics)
        try await eventually(60, "a revocation under way") { observer.revocations >= 1 }

        let began = ContinuousClock.now
        pipeline.beginShutdown()
        let returned = try await withThrowingTaskGroup(of: Bool.self) { tasks in
            tasks.addTask {
                try await run.value
                return true
            }
            tasks.addTask {
                // Far from both the 6 s budget and the revocation's 120 s bound: a slow machine's
                // teardown cannot fail it, a shutdown that waited for the revocation would.
                try await Task.sleep(for: shutdownTimeout + .seconds(40))
                return false
            }
            defer { tasks.cancelAll() }
            return try await tasks.next() ?? false
        }
        let took = ContinuousClock.now - began
        #expect(returned, "run() still running \(took) after the shutdown began (shutdownTimeout \(shutdownTimeout))")
        if !returned {
            sender.releaseHeld()
            try await run.value
        }
        await other.close()
    }
}
