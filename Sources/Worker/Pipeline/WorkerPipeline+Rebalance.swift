import APNs
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Synchronization
import Threading

/// Partitions given and taken: a revocation drains and commits what it takes away; an assignment
/// reads where the partition's progress was kept, so nothing finished is pushed again.
extension WorkerPipeline {
    fileprivate func revoked(_ partitions: [KafkaTopicPartition], lost: Bool) async {
        observer.partitionsRevoked(partitions)
        // Lost: the group threw this member out (it rejoins, and is ready again once assigned).
        if lost || isStopping { observer.consumerLeft() }
        let selection = Set(partitions)
        // Nothing of these partitions is pushed from now on: what waits for a retry is the next
        // owner's (abandoned at once), what is at APNs finishes and counts.
        for lease in state.withLock({ $0.revoke(partitions) }) {
            lease.handOver()
            scheduler.cancel(lease: lease)
        }
        abandonParked(all: false)
        // Each wait below is bounded by `revocationTimeout`, and by the shutdown budget once a stop
        // has begun, before this revocation or during it (`deadline(_:orShutdown:)`): one deadline
        // bounds a shutdown, whatever it finds under way.
        //
        // What is at APNs finishes (bounded) under this lease, so that it counts as done here: a
        // lost assignment is most often given back to this very member, which then skips what it
        // finished (below, `owed`) instead of pushing it again. Before, a lost assignment did not
        // wait, and what was at APNs or publishing its result at that moment ran again.
        await waitForDrain(of: selection, until: .now + configuration.revocationTimeout)
        // A lost assignment may already be someone else's: nothing to commit.
        if !lost {
            // Bounded: this runs while librdkafka's poll thread waits for it, and a commit can wait
            // for the very rebalance that waits for us (seen on the mock cluster: two members both
            // idle for minutes). Past the bound the partitions go uncommitted past their last
            // commit: their next owner reads those events again (duplicates, never losses).
            // Tried again (a commit refused while the group rebalances, a broker that allows less
            // metadata) until stored or the bound passes.
            let began = ContinuousClock.now
            let deadline = began + configuration.revocationTimeout
            let committed = await commitWithRetries(selection, until: deadline)
            if !committed {
                observer.revocationCommitGaveUp()
                logger.warning(
                    "revocation: the commit was refused or not done within \(ContinuousClock.now - began); letting the partitions go uncommitted"
                )
                await keepProgressUncommitted(selection, until: deadline + .seconds(2))
            }
        }
        // The partitions are gone: what of them still waits for a retry is abandoned at its next
        // step (their next owner pushes it), not pushed from here as well.
        for lease in state.withLock({ $0.forget(partitions) }) { lease.end() }
    }

    /// Commits `partitions` ahead of any other commit, tried again (a commit refused while the group
    /// rebalances, a broker that allows less metadata) until stored or `deadline` passes. Nothing to
    /// commit (committed already) counts as stored.
    func commitWithRetries(_ partitions: Set<KafkaTopicPartition>, until deadline: ContinuousClock.Instant) async
        -> Bool
    {
        if state.withLock({ $0.commitCandidates(in: partitions).isEmpty }) { return true }
        var outcome = CommitQueue.Outcome.worthRetrying
        while outcome == .worthRetrying, ContinuousClock.now < self.deadline(deadline, orShutdown: .commit),
            !commits.isFinished
        {
            outcome = await commitRevoked(partitions, until: deadline)
            if outcome == .worthRetrying { try? await Task.sleep(for: .milliseconds(200)) }
        }
        return outcome == .stored
    }

    /// Before a lane leaves the group (`PipelineLanes`): its events drained (bounded) and its
    /// progress committed while every lane is still a member. Two members of one process leaving
    /// at once made the later one's commit meet the rebalance the earlier one's leave began
    /// (REBALANCE_IN_PROGRESS until its bound): its done events ran again on the next owner.
    func commitBeforeLeaving() async {
        let budget = shutdownBudget()
        await waitForDrain(of: nil, until: budget.drain)
        let owned = state.withLock { $0.owned }
        _ = await commitWithRetries(owned, until: budget.commit)
    }

    /// One commit of revoked partitions, ahead of any other; `.refused` if not done by `deadline`.
    private func commitRevoked(
        _ partitions: Set<KafkaTopicPartition>, until deadline: ContinuousClock.Instant
    ) async -> CommitQueue.Outcome {
        await withCheckedContinuation { (continuation: CheckedContinuation<CommitQueue.Outcome, Never>) in
            let once = ResumeOnce(continuation)
            // Cancelled once the commit is done: no sleeping task outlives a quick revocation.
            let timer = Task {
                guard await self.sleep(until: deadline, orShutdown: .commit) else { return }
                once.resume(.refused)
            }
            let done: @Sendable (CommitQueue.Outcome) -> Void = { outcome in
                timer.cancel()
                once.resume(outcome)
            }
            if !commits.commitNow(partitions, done: done) { done(.refused) }
        }
    }

    fileprivate func assigned(_ partitions: [KafkaTopicPartition], tenure: UInt64) async {
        observer.consumerJoined()
        // Bounded well inside the consumer's handler bound (max.poll.interval.ms): past that the poll
        // thread would go on, and records of the new tenure would reach the reader before their
        // lease exists. Too slow an answer only means its done records run again: each partition's
        // that has not come (`ProgressLearning`), or every partition's if the committed offsets have not.
        let limit = min(.seconds(30), maxPollInterval / 4)
        let deadline = ContinuousClock.now + limit
        let learning = Locked(ProgressLearning())
        let answer = await withCheckedContinuation {
            (continuation: CheckedContinuation<ProgressLearning.Answer, Never>) in
            let timer = Task {
                guard await self.sleep(until: deadline, orShutdown: .drain),
                    let answer = learning.withLock({ $0.give() })
                else { return }
                if answer == .unread {
                    self.logger.warning(
                        "the done records of \(partitions.count) assigned partition(s) were not read within \(limit); what their last owner finished above the committed offsets is pushed again"
                    )
                }
                continuation.resume(returning: answer)
            }
            Task {
                await self.learnProgress(of: partitions, into: learning, until: deadline)
                timer.cancel()
                if let answer = learning.withLock({ $0.give() }) { continuation.resume(returning: answer) }
            }
        }
        var progress: [KafkaTopicPartition: KnownProgress] = [:]
        if case .decided(let decision) = answer {
            reportRefused(decision.refused)
            if !decision.unchecked.isEmpty {
                logger.warning(
                    "the end of \(decision.unchecked.count) assigned partition(s) with done records (\(decision.unchecked.prefix(5).map(\.description).joined(separator: ", "))\(decision.unchecked.count > 5 ? ", …" : "")) was not learnt within \(limit), so their done records cannot be checked: what they name above the committed offsets is pushed again"
                )
            }
            progress = decision.progress
        }
        let ended = state.withLock { $0.assign(partitions, tenure: tenure, progress: progress) }
        for lease in ended { lease.end() }
        if progress.values.contains(where: { !$0.done.isEmpty }) { commits.wantCommit() }
    }

    /// Learns, into `learning`, what the partitions' committed offsets say is done above them (their
    /// metadata, or the progress topic), what this member finished there before a revocation, or a
    /// lost assignment, that could not commit it, and each partition's end to check them against, as
    /// each comes, until `deadline`. Read before any record of the new assignment is admitted (the
    /// poll thread waits for the assignment's handler).
    private func learnProgress(
        of partitions: [KafkaTopicPartition], into learning: Locked<ProgressLearning>,
        until deadline: ContinuousClock.Instant
    ) async {
        let owedHere = state.withLock { $0.takeOwed(partitions) }
        guard let consumer = consumerBox.withLock({ $0 }) else { return }
        let committed: [KafkaTopicPartition: KafkaTopicPartitionOffset]
        do {
            committed = try await consumer.committed(partitions)
        } catch {
            logger.warning(
                "could not read the committed offsets' metadata of \(partitions.count) partition(s): \(error); records their last owner finished above the committed offsets are pushed again"
            )
            return
        }
        var fromTopic: [KafkaTopicPartition: OffsetRanges] = [:]
        let bare = committed.filter { $0.value.metadata == nil }.mapValues(\.offset)
        if let progressTopic, !bare.isEmpty, progressStore.withLock({ $0 }) != .commitMetadata {
            do {
                fromTopic = try await progressTopic.read(committed: bare)
            } catch {
                logger.warning(
                    "could not read \(progressTopic.topic): \(error); records their last owner finished above the committed offsets are pushed again"
                )
            }
        }
        let stored = KnownProgress.read(committed: committed, fromTopic: fromTopic)
        for problem in stored.unreadable {
            logger.warning(
                "\(problem.partition): the committed offset's metadata is \(problem.error); ignored, so every record from offset \(problem.committed) on is run"
            )
        }
        let starting = StartingProgress(
            partitions: partitions, committed: committed.mapValues(\.offset), read: stored.known, owed: owedHere,
            bounds: DoneRecordBounds(maxInFlight: configuration.maxInFlight, maxParked: configuration.maxParked))
        learning.withLock { $0.read(starting) }
        await PartitionEnds.learn(
            starting.tops, consumer: consumer, reader: consumerConfiguration, until: deadline, logger: logger
        ) { partition, end in
            learning.withLock { $0.learned(end: end, of: partition) }
        }
    }

    /// Done records that cannot be true (`DoneRecordBounds`: past the partition's end, more left not
    /// done inside them than a writer could have had unfinished) were refused: counted and logged.
    /// Read back, every event from the committed offset on is run; owed (this member's own, from an
    /// earlier lease), what it finished there is run again.
    private func reportRefused(_ refused: [StartingProgress.Refused]) {
        let bounds = DoneRecordBounds(maxInFlight: configuration.maxInFlight, maxParked: configuration.maxParked)
        for refusal in refused {
            let known = refusal.known
            observer.doneRecordsRefused(refusal.refusal)
            let what =
                refusal.owed
                ? "done records this member owed itself there, with those read back" : "done records read back"
            let why =
                refusal.refusal == .pastEnd
                ? "the partition ends at \(refusal.end)"
                : "more than \(bounds.maxGaps) stretches left not done inside them"
            let outcome =
                refusal.owed
                ? "what it owed is ignored, so what it finished there is run again"
                : "ignored, so every record from offset \(known.committed) on is run"
            logger.warning(
                "\(refusal.partition): the \(what) (committed \(known.committed), \(known.done.count) done up to \(known.done.ranges.last?.upperBound ?? 0)) cannot be true: \(why); \(outcome)"
            )
        }
    }
}

extension WorkerPipeline {
    /// A record read inside the done records a partition started from, not done there, was one more
    /// than a writer could have left unfinished (`PartitionOffsets`): what they name from it on runs.
    func reportKnownDoneRefused(_ partition: KafkaTopicPartition, at offset: Int64) {
        observer.doneRecordsRefused(.tooManyGaps)
        let bound = DoneRecordBounds(maxInFlight: configuration.maxInFlight, maxParked: configuration.maxParked)
        logger.warning(
            "\(partition): more than \(bound.maxGaps) records read inside the done records it started from were not done there, more than their writer could have left unfinished; they cannot be true, so every record from offset \(offset) on is run"
        )
    }
}

/// Where a worker keeps the done records above its committed offsets.
package enum ProgressStore: String, Sendable, CaseIterable {
    /// Not known yet: the start's probe has not been answered.
    case unknown
    /// In the commits' metadata: the broker gives it back.
    case commitMetadata = "commit-metadata"
    /// The broker drops commit metadata: in `delivery.progressTopic`.
    case progressTopic = "progress-topic"
}

/// Why the pipeline stopped on its own.
package enum PipelineError: Error, CustomStringConvertible {
    /// An output topic refused every record for longer than `publishBlockedLimit`.
    case outputTopicBlocked(topic: String, for: Duration)
    /// The broker drops commit metadata and no progress topic is set: not started.
    case brokerDropsCommitMetadata
    /// The broker refused the commit-metadata probe (ACLs) and no progress topic is set: not started.
    case progressProbeRefused(group: String, KafkaError)

    package var description: String {
        switch self {
        case .outputTopicBlocked(let topic, let duration):
            return "\(topic) refused every record for \(duration); stopping so that a restart (or an operator) can act"
        case .brokerDropsCommitMetadata:
            return CommitMetadataProbe.refusal
        case .progressProbeRefused(let group, let error):
            return
                "could not find out whether the broker keeps commit metadata (group \(group): \(error)): \(CommitMetadataProbe.advice(for: error, progressTopic: nil))"
        }
    }

    /// A configuration the worker cannot run with (`run` exits 2), not a failure while running.
    package var isConfigurationProblem: Bool {
        switch self {
        case .outputTopicBlocked: false
        case .brokerDropsCommitMetadata, .progressProbeRefused: true
        }
    }
}

/// A continuation that the first of several racing parties resumes; the others find it spent.
final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: Locked<CheckedContinuation<T, Never>?>

    init(_ continuation: CheckedContinuation<T, Never>) {
        self.continuation = Locked(continuation)
    }

    func resume(_ value: T) {
        continuation.withLock { spent in
            defer { spent = nil }
            return spent
        }?.resume(returning: value)
    }

    /// `work`'s value, or `timedOut` when `wait` passes first: the work then goes on, unawaited (a
    /// client closing, a request at a peer that does not answer). The timer ends with the work.
    static func first(
        of work: @escaping @Sendable () async -> T, orAfter wait: Duration, timedOut: T
    ) async -> T {
        await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let timer = Task {
                guard (try? await Task.sleep(for: wait)) != nil else { return }
                once.resume(timedOut)
            }
            Task {
                let value = await work()
                timer.cancel()
                once.resume(value)
            }
        }
    }
}

/// The consumer's rebalance callbacks, into the pipeline.
struct RebalanceBridge: KafkaRebalanceHandler {
    let pipeline: WorkerPipeline

    func partitionsAssigned(_ partitions: [KafkaTopicPartition], tenure: UInt64) async {
        await pipeline.assigned(partitions, tenure: tenure)
    }

    func partitionsRevoked(_ partitions: [KafkaTopicPartition], lost: Bool) async {
        await pipeline.revoked(partitions, lost: lost)
    }
}
