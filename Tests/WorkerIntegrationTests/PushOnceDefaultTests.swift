import Foundation
import Kafka
import NIOConcurrencyHelpers
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// Pushing once is the default on every broker: where the broker drops commit metadata and no
/// progress topic is set, the worker would push again, after every crash or hand-over, what finished
/// above an event still waiting. It refuses to start instead, before reading a record, and says what
/// to create.
@Suite("Push once by default", .serialized, .timeLimit(.minutes(3)))
struct PushOnceDefaultTests {
    @Test("on a broker that drops commit metadata, without delivery.progressTopic, run refuses to start and says why")
    func refusedWithoutAProgressTopic() async throws {
        let harness = try await Harness.start(broker: .tansu, partitions: 1)
        defer { Task { await harness.shutdown() } }
        try await harness.produce((0..<5).map { DeliveryUnderFailureTests.event("event-\($0)", token: $0 + 1) })
        let worker = try harness.startWorker(group: "no-progress-topic") { $0.delivery.progressTopic = nil }
        // Whether run() ended within a minute, and how (a task group would wait for a worker that runs on).
        let ended = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Void, any Error>?, Never>) in
            let once = TestOnce(continuation)
            Task { once.resume(await worker.task.result) }
            Task {
                try? await Task.sleep(for: .seconds(60))
                once.resume(nil)
            }
        }
        guard let ended else {
            Issue.record("the worker ran on a broker that drops commit metadata without a progress topic")
            try await worker.stop()
            return
        }
        guard case .failure(let error) = ended else {
            Issue.record("the worker stopped without an error")
            return
        }
        let text = "\(error)"
        #expect(text.contains("drops commit metadata") && text.contains("delivery.progressTopic"), "\(text)")
        #expect(try await harness.allRecords(of: EmbeddedStack.resultsTopic).isEmpty, "it read and pushed events")
    }
}

/// A continuation that the first of several racing parties resumes.
final class TestOnce<T: Sendable>: Sendable {
    private let continuation: NIOLockedValueBox<CheckedContinuation<T, Never>?>

    init(_ continuation: CheckedContinuation<T, Never>) { self.continuation = NIOLockedValueBox(continuation) }

    func resume(_ value: T) {
        continuation.withLockedValue { spent in
            defer { spent = nil }
            return spent
        }?.resume(returning: value)
    }
}
