import ServiceLifecycle
import Threading

/// The lanes' pipelines (`consumer.lanes`) as one service: they run side by side and stop together.
/// A stop of one (a graceful shutdown, a failure) begins the others' at once, so that they drain at
/// the same time, within one `delivery.shutdownTimeout`, not one after the other as separate
/// services of a group would. Each lane closes its own APNs connections after its own drain.
package struct PipelineLanes: Service {
    package let pipelines: [WorkerPipeline]

    package init(_ pipelines: [WorkerPipeline]) {
        self.pipelines = pipelines
        let barrier = LeaveBarrier(lanes: pipelines.count)
        for pipeline in pipelines {
            pipeline.stopsWith(pipelines.filter { $0 !== pipeline }, barrier: barrier)
        }
    }

    /// Ends when every lane has ended; throws the first lane's failure.
    package func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for pipeline in pipelines {
                group.addTask {
                    do {
                        try await pipeline.run()
                    } catch {
                        // A lane that failed before its stop began (its producer could not be
                        // made) stops the others: the worker exits instead of running half.
                        for other in pipelines { other.beginShutdown() }
                        throw error
                    }
                }
            }
            // Not cancelled at the first failure: that lane's stop has begun the others', and each
            // finishes its drain and its commit.
            try await group.waitForAll()
        }
    }
}

/// Where the lanes' stopping pipelines wait for each other before their consumers leave the group:
/// each arrives once it has drained and committed, and goes on once all have arrived, or at its
/// deadline.
final class LeaveBarrier: Sendable {
    private struct State {
        var missing: Int
        var waiters: [ResumeOnce<Void>] = []
    }

    private let state: Locked<State>

    init(lanes: Int) { state = Locked(State(missing: lanes)) }

    func arrive(until deadline: ContinuousClock.Instant) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiter = ResumeOnce(continuation)
            let arrived = state.withLock { state -> [ResumeOnce<Void>]? in
                state.missing -= 1
                state.waiters.append(waiter)
                guard state.missing <= 0 else { return nil }
                defer { state.waiters = [] }
                return state.waiters
            }
            if let arrived {
                for waiter in arrived { waiter.resume(()) }
            } else {
                // Past the deadline, go on without the lanes still draining.
                Task {
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    waiter.resume(())
                }
            }
        }
    }
}
