import APNs
import ServiceLifecycle
import Threading

/// The lanes' pipelines (`consumer.lanes`) as one service: they run side by side and stop together.
/// A stop of one (a graceful shutdown, a failure) begins the others' at once, so that they drain at
/// the same time, within one `delivery.shutdownTimeout`, not one after the other as separate
/// services of a group would; and the APNs connections they share close once, after the last lane
/// has drained (`SharedSender`).
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
            let release = state.withLock { state -> [ResumeOnce<Void>]? in
                state.missing -= 1
                state.waiters.append(waiter)
                guard state.missing <= 0 else { return nil }
                defer { state.waiters = [] }
                return state.waiters
            }
            if let release {
                for waiter in release { waiter.resume(()) }
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

/// One sender for several lanes: requests pass through, and its `shutdown` closes the connections
/// once every lane has asked to, each lane waiting until then (a lane that drained first would
/// otherwise close the connections under the others' requests).
package final class SharedSender: NotificationSending {
    private struct State {
        var waiting: Int
        var closed = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let sender: any NotificationSending
    private let state: Locked<State>

    /// - Parameter lanes: how many lanes call `shutdown`.
    package init(_ sender: any NotificationSending, lanes: Int) {
        self.sender = sender
        self.state = Locked(State(waiting: lanes))
    }

    package func send(_ requests: [NotificationRequest]) { sender.send(requests) }

    package func credential(forTopic topic: String, environment: APNsEnvironment) -> String? {
        sender.credential(forTopic: topic, environment: environment)
    }

    package func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Decided under one lock: the closer resumes exactly the continuations it found there.
            let closes = state.withLock { state -> Bool? in
                guard !state.closed else { return nil }
                state.waiters.append(continuation)
                state.waiting -= 1
                return state.waiting == 0
            }
            guard let closes else {
                continuation.resume()  // closed already
                return
            }
            guard closes else { return }
            Task {
                await sender.shutdown()
                let waiters = state.withLock { state in
                    state.closed = true
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume() }
            }
        }
    }
}
