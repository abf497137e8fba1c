import Foundation
import Kafka
import Testing
import Worker
import WorkerDemo

/// The progress topic is written by the commit loop, which waits for each record: a producer that
/// learned that topic's partitions only when its first record came (librdkafka asks then) held the
/// lane's first commit with done records for 0.3 to 0.7 s on Tansu, and a SIGKILL then made the
/// next worker push again everything that lane had finished since its start.
@Suite("The worker's producer and the progress topic", .serialized, .timeLimit(.minutes(2)))
struct ProgressTopicProducerTests {
    // Known partitions show as a record to one that does not exist being refused as it is
    // enqueued; a producer that does not know them yet enqueues it, asks, and fails it later. The
    // results topic, prepared at start, tells when the start's metadata has come; the progress
    // topic is asked about once, after that.
    @Test("a worker with a progress topic knows its partitions before its first commit")
    func progressTopicIsPreparedAtStart() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let worker = try harness.startWorker(group: "progress-prepared")
        try await eventually(30, "the worker's producer") { worker.assembly.pipeline.producerForTesting != nil }
        let producer = try #require(worker.assembly.pipeline.producerForTesting)
        let refusedAtOnce: @Sendable (String) -> Bool = { topic in
            do {
                try producer.trySend(KafkaProducerMessage(topic: topic, partition: 7, value: [1])) { _ in }
                return false
            } catch {
                return true
            }
        }
        try await eventually(30, "the results topic's partitions") { refusedAtOnce(EmbeddedStack.resultsTopic) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(
            refusedAtOnce(EmbeddedStack.progressTopic),
            "the progress topic's partitions are known before anything is written there")
        try await worker.stop()
    }
}
