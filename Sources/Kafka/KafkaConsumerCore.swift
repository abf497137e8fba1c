import Dispatch
import Foundation
import Logging
import Synchronization
import Threading

/// The part of a consumer that librdkafka's callbacks and the poll thread reach: state, pauses, the
/// rebalance handler. Separate from `KafkaConsumer` so callbacks can be set before the handle exists.
final class KafkaConsumerCore: Sendable {
    let state: Locked<StateMachine>
    /// The pause set last applied to librdkafka. Not in the state machine: its lock is held across
    /// the pause and resume calls into librdkafka, to order them (the latest decision is always the
    /// one librdkafka ends up with), and the state's lock, taken on every record, must never wait
    /// for a C call.
    private let appliedPauses = Locked<Set<KafkaTopicPartition>>([])
    private let handler: (any KafkaRebalanceHandler)?
    private let handlerTimeout: Duration
    let logger: Logger
    private let stopRequested = Atomic<Bool>(false)
    /// When the poll thread last went round its loop (or, inside a rebalance handler, last checked
    /// on it), in `DispatchTime` nanoseconds: a liveness probe's view of the thread.
    private let lastPolled = Atomic<UInt64>(DispatchTime.now().uptimeNanoseconds)
    /// Signalled by the reader when the poll thread waits for room in a full buffer.
    let spaceAvailable = DispatchSemaphore(value: 0)
    /// How long a full buffer keeps the poll thread waiting before the partitions are paused. Longer
    /// than a slow APNs round trip, for which the worker's reader stops at its in-flight bound: a pause
    /// throws away librdkafka's prefetch, and librdkafka 2.0 fetches again only at its broker
    /// thread's next wake-up, up to a second after the resume (at 500 ms, a 600 ms round trip cost
    /// the worker a sixth of its throughput). The price: a rebalance that comes while the buffer is
    /// full waits up to this long for the poll thread.
    static let fullBufferGrace: Duration = .seconds(2)

    /// Stalled partitions (`PartitionStallWatch`), looked for by the poll thread; the broker's ends
    /// are asked for on `stallQueue` (a blocking request the poll thread must not wait for).
    private let stallWatch: Locked<PartitionStallWatch>?
    private let stallHandler: (@Sendable (KafkaPartitionStall) -> Void)?
    /// Under the next-generation protocol: notices a coordinator that never answers a heartbeat.
    private let heartbeatWatch: HeartbeatWatch?
    /// Where that is said (the consumer's error handler), besides the log.
    private let errorHandler: (@Sendable (KafkaError) -> Void)?
    private let stallQueue = DispatchQueue(label: "kafka.consumer.stalls")
    /// The broker's answers from `stallQueue`, applied by the poll thread (`applyStallAnswers`).
    private let stallAnswers = Locked<[(KafkaTopicPartition, end: Int64?)]>([])
    /// Held across a change of the assignment made from outside the poll thread (`assign(_:)`) and
    /// across a stall answer's check of the tenure and its seek, so that no seek lands in an
    /// assignment it was not decided for. (The rebalance callbacks run on the poll thread, as the
    /// answers are applied, so they never interleave with one.)
    let assignmentChange = Locked<Void>(())
    /// The broker's end of a partition for the stall watch; `nil` asks the broker (ListOffsets). Tests
    /// give one that answers when they choose, to put a rebalance between a look and its answer.
    private let partitionEnd: (@Sendable (KafkaTopicPartition) -> Int64?)?

    init(
        capacity: Int, byteCapacity: Int = .max, handler: (any KafkaRebalanceHandler)?, handlerTimeout: Duration,
        stallBound: Duration? = nil, stallHandler: (@Sendable (KafkaPartitionStall) -> Void)? = nil,
        partitionEnd: (@Sendable (KafkaTopicPartition) -> Int64?)? = nil, heartbeatWatch: HeartbeatWatch? = nil,
        errorHandler: (@Sendable (KafkaError) -> Void)? = nil, logger: Logger
    ) {
        self.partitionEnd = partitionEnd
        self.heartbeatWatch = heartbeatWatch
        self.errorHandler = errorHandler
        self.state = Locked(StateMachine(capacity: capacity, byteCapacity: byteCapacity))
        self.handler = handler
        self.handlerTimeout = handlerTimeout
        self.stallWatch = stallBound.map { Locked(PartitionStallWatch(bound: $0)) }
        self.stallHandler = stallHandler
        self.logger = logger
    }

    // MARK: poll thread

    /// The thread holds the client and this core until `close()` ends its loop.
    func startPolling(_ client: RDKafkaClient) {
        let thread = Thread { [self] in
            nameCurrentThread(Self.pollThreadName)
            pollLoop(client)
        }
        thread.start()
    }

    /// The poll thread's name as `top -H`, `ps -L` and `perf` show it. Set by the thread itself:
    /// Foundation on Linux does not pass a name given before `start()` to the system, and Linux takes
    /// at most 15 bytes.
    static let pollThreadName = "kafka-consumer"

    /// Records taken from librdkafka per hand-over to a waiting reader.
    static let pollBatch = 64

    private func pollLoop(_ client: RDKafkaClient) {
        var topicNames = TopicNames()
        let clock = ContinuousClock()
        var nextStallLook = clock.now
        while !stopRequested.load(ordering: .acquiring) {
            markPolled()
            if let heartbeatWatch, heartbeatWatch.due() {
                let error = KafkaError(code: .unsupportedFeature, message: HeartbeatWatch.message)
                logger.error("\(error)")
                errorHandler?(error)
            }
            if let stallWatch { applyStallAnswers(client, stallWatch) }
            if let stallWatch, clock.now >= nextStallLook {
                nextStallLook = clock.now.advanced(by: min(stallWatch.withLock { $0.bound } / 4, .seconds(5)))
                lookForStalls(client, stallWatch)
            }
            waitForSpace(client)
            // Waits up to 100 ms for the first record, then takes only what librdkafka already holds
            // (up to `pollBatch`, or until the buffer is full), and wakes a waiting reader once.
            // Each record enters the state machine as it is polled, so a rebalance served by a later
            // poll of the batch drops the revoked partitions' records like any buffered ones.
            var timeout: Int32 = 100
            for _ in 0..<Self.pollBatch {
                guard let polled = client.consumer.poll(timeoutMilliseconds: timeout, topicNames: &topicNames)
                else { break }
                if receive(polled) { break }
                timeout = 0
            }
            if let (waiter, first) = state.withLock({ $0.handOver() }) { waiter.resume(returning: first) }
        }
        // Leaving the group revokes the assignment, through the rebalance handler, inside this call.
        if let error = client.consumer.close() {
            logger.warning("consumer close: \(error)")
        }
        let (reader, closers) = state.withLock { ($0.finish(.closed), $0.pollThreadStopped()) }
        reader?.resume(returning: nil)
        for closer in closers { closer.resume() }
    }

    /// The positions of the partitions being fetched (assigned, not paused) into the watch, with the
    /// tenure they were seen in; the broker's end asked for each that has not moved for the bound, on
    /// `stallQueue` (a blocking request the poll thread must not wait for), its answer left for
    /// `applyStallAnswers`.
    private func lookForStalls(_ client: RDKafkaClient, _ watch: Locked<PartitionStallWatch>) {
        let (assigned, desiredPauses, tenure) = state.withLock { ($0.assigned, $0.desiredPauses, $0.tenure) }
        let fetching = assigned.subtracting(desiredPauses).subtracting(appliedPauses.withLock { $0 })
        let positions = client.positions(of: fetching)
        let observation = watch.withLock { $0.observe(positions: positions, tenure: tenure, now: .now) }
        for partition in observation.recovered {
            logger.info("partition \(partition) is reading again after a stall")
            stallHandler?(.recovered(partition))
        }
        guard !observation.ask.isEmpty else { return }
        stallQueue.async { [self] in
            for partition in observation.ask where !stopRequested.load(ordering: .acquiring) {
                let end =
                    partitionEnd.map { $0(partition) }
                    ?? (try? client.watermarks(of: partition, timeout: .seconds(5)).high)
                stallAnswers.withLock { $0.append((partition, end)) }
            }
        }
    }

    /// The broker's answers so far, each judged against the assignment as it is now and acted on (a
    /// stalled partition sought to its position) before it can change: the poll thread serves the
    /// rebalance callbacks, and `assignmentChange` keeps `assign(_:)` out meanwhile.
    private func applyStallAnswers(_ client: RDKafkaClient, _ watch: Locked<PartitionStallWatch>) {
        let answers = stallAnswers.withLock { answers in
            defer { answers.removeAll() }
            return answers
        }
        for (partition, end) in answers {
            let verdict = assignmentChange.withLock { _ -> PartitionStallWatch.Verdict in
                let (tenure, fetching) = state.withLock { state in
                    (state.tenure, state.assigned.contains(partition) && !state.desiredPauses.contains(partition))
                }
                let paused = appliedPauses.withLock { $0.contains(partition) }
                let position = fetching && !paused ? client.positions(of: [partition])[partition] : nil
                let verdict = watch.withLock {
                    $0.answered(partition, end: end, tenure: tenure, position: position, now: .now)
                }
                guard case .stalled(let position, _, _) = verdict else { return verdict }
                do {
                    try client.seek(KafkaTopicPartitionOffset(partition, offset: position))
                } catch {
                    logger.warning("partition \(partition): seeking to \(position) after a stall failed: \(error)")
                }
                return verdict
            }
            guard case .stalled(let position, let end, let first) = verdict else { continue }
            logger.warning(
                "partition \(partition) is stalled: its position \(position) has not moved for \(watch.withLock { $0.bound }) while the broker holds records up to \(end); sought to \(position) to restart its fetch"
            )
            stallHandler?(.stalled(partition, position: position, end: end, first: first))
        }
    }

    private func markPolled() {
        lastPolled.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
    }

    /// How long ago the poll thread last went round (a handler it waits for counts as going round:
    /// that wait is bounded by itself).
    var sincePolled: Duration {
        let now = DispatchTime.now().uptimeNanoseconds
        let then = lastPolled.load(ordering: .relaxed)
        return .nanoseconds(Int64(now > then ? now - then : 0))
    }

    /// Keeps the poll thread waiting while the buffer is full, up to `fullBufferGrace`; then pauses the
    /// partitions, so that polling (and with it rebalances and heartbeats) goes on without records.
    private func waitForSpace(_ client: RDKafkaClient) {
        let deadline = ContinuousClock.now + Self.fullBufferGrace
        while !stopRequested.load(ordering: .acquiring) {
            guard case .wait = state.withLock({ $0.checkSpace() }) else { return }
            if ContinuousClock.now >= deadline {
                if state.withLock({ $0.pauseForFlow() }) { applyPauses(client.consumer) }
                return
            }
            _ = spaceAvailable.wait(timeout: .now() + .milliseconds(50))
            markPolled()
        }
    }

    /// Buffers a polled record (or logs an error event). Returns true when the batch should end: the
    /// buffer is full or the sequence has ended.
    private func receive(_ polled: RDKafkaConsumerHandle.Polled) -> Bool {
        switch polled {
        case .record(let record):
            return state.withLock({ $0.push(record) }) != .buffered(full: false)
        case .partitionEnd:
            return false
        case .fatal(let error):
            fail(error)
            return true
        case .error(let error):
            logger.warning("consumer: \(error)")
            return false
        }
    }

    /// The reader took a record: wake the poll thread if it waits for room, apply a lifted pause.
    func tookRecord(pausesChanged: Bool, wakePoller: Bool, client: RDKafkaClient) {
        if wakePoller { spaceAvailable.signal() }
        if pausesChanged { applyPauses(client.consumer) }
    }

    func clientError(_ error: KafkaError) {
        if error.isFatal {
            fail(error)
        } else {
            logger.warning("\(error)")
        }
    }

    private func fail(_ error: KafkaError) {
        logger.error("consumer failed: \(error)")
        state.withLock { $0.finish(.failed(error)) }?.resume(throwing: error)
    }

    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if state.withLock({ $0.waitForPollThread(continuation) }) { continuation.resume() }
            stopRequested.store(true, ordering: .releasing)
        }
    }

    // MARK: pauses

    /// Makes librdkafka's paused set match the state machine's desired one.
    ///
    /// `appliedPauses` is what librdkafka has paused, assigned or not: librdkafka keeps a
    /// partition's pause flag after the partition is revoked (its partition objects outlive the
    /// assignment), so a partition revoked while paused stays in it, and is resumed here when it is
    /// assigned back unpaused. (Forgetting it at the revocation left such a partition paused for
    /// good while the state machine, whose caller pauses end with the revocation, believed it
    /// fetching.) Partitions never paused are never resumed: a resume makes librdkafka restart the
    /// partition's fetch, which can deliver records twice.
    func applyPauses(_ consumer: RDKafkaConsumerHandle) {
        appliedPauses.withLock { applied in
            let (desired, assigned) = state.withLock { ($0.desiredPauses, $0.assigned) }
            let toPause = desired.subtracting(applied)
            let toResume = applied.subtracting(desired).intersection(assigned)
            if !toPause.isEmpty { consumer.pause(toPause) }
            if !toResume.isEmpty { consumer.resume(toResume) }
            // Revoked partitions keep their flag in librdkafka until they are assigned back.
            applied = desired.union(applied.subtracting(assigned))
        }
    }

    /// Before an assignment: resumes the partitions being assigned that librdkafka still has paused
    /// from an earlier tenure (it keeps the flag after a revocation), unless everything is to stay
    /// paused for flow. Before, not after: librdkafka (2.0, and still open upstream) discards an op
    /// whose version is older than the partition's latest, and a resume's version barrier taken
    /// just after the assignment can outdate the assignment's own fetch start, when the committed
    /// offset came back first. The partition then never fetches. Done first, the resume is older
    /// than the fetch start, which is only made once the committed offset is known.
    private func resumeLeftPaused(_ consumer: RDKafkaConsumerHandle, assigning partitions: [KafkaTopicPartition]) {
        appliedPauses.withLock { applied in
            guard !state.withLock({ $0.pausedForFlow }) else { return }
            let leftover = applied.intersection(partitions)
            guard !leftover.isEmpty else { return }
            consumer.resume(leftover)
            applied.subtract(leftover)
        }
    }

    /// What librdkafka has paused among the assigned partitions (same lock order as `applyPauses`).
    var pausedPartitions: Set<KafkaTopicPartition> {
        appliedPauses.withLock { applied in applied.intersection(state.withLock { $0.assigned }) }
    }

    // MARK: rebalance (poll thread, inside a poll of the consumer or its close)

    func rebalance(_ rebalance: RDKafkaRebalance) {
        let partitions = rebalance.partitions
        let consumer = rebalance.consumer
        switch rebalance.event {
        case .assign:
            logger.info("partitions assigned: \(partitions.map(\.description).joined(separator: ", "))")
            resumeLeftPaused(consumer, assigning: partitions)
            if let error = rebalance.assign() { logger.error("assign: \(error)") }
            let tenure = state.withLock { $0.assign(partitions) }
            applyPauses(consumer)
            runHandler { await $0.partitionsAssigned(partitions, tenure: tenure) }

        case .revoke:
            let lost = rebalance.isLost
            logger.info(
                "partitions revoked\(lost ? " (lost)" : ""): \(partitions.map(\.description).joined(separator: ", "))")
            let pausesChanged = state.withLock { $0.revoke(partitions) }
            runHandler { await $0.partitionsRevoked(partitions, lost: lost) }
            if let error = rebalance.unassign() { logger.error("unassign: \(error)") }
            if pausesChanged { applyPauses(consumer) }

        case .failed(let error):
            logger.error("rebalance failed: \(error); dropping the assignment")
            let all = state.withLock { Array($0.assigned) }
            _ = state.withLock { $0.revoke(all) }
            runHandler { await $0.partitionsRevoked(all, lost: true) }
            rebalance.dropAssignment()
        }
    }

    /// Runs the handler and keeps the poll thread waiting until it returns (bounded by `handlerTimeout`).
    private func runHandler(_ body: @escaping @Sendable (any KafkaRebalanceHandler) async -> Void) {
        guard let handler else { return }
        let done = DispatchSemaphore(value: 0)
        Task {
            await body(handler)
            done.signal()
        }
        let milliseconds = Int(handlerTimeout.milliseconds)
        let deadline = DispatchTime.now() + .milliseconds(milliseconds)
        // In slices, so that the thread shows alive while it waits (the wait is bounded).
        while done.wait(timeout: min(deadline, .now() + .seconds(1))) == .timedOut {
            markPolled()
            if DispatchTime.now() >= deadline {
                logger.error("rebalance handler still running after \(milliseconds) ms; letting the partitions go")
                return
            }
        }
    }
}
