import APNs
import Foundation
import Kafka
import Logging
import ServiceLifecycle
import Synchronization
import Threading

/// Drains and commits: waiting for in-flight events to finish, the one committer, and the done
/// records kept above committed offsets (in commit metadata or the progress topic).
extension WorkerPipeline {
    // MARK: drains and commits

    /// Waits until no event of these partitions (of any, for `nil`) is in flight, or the deadline (the
    /// shutdown budget's drain, if a stop begins first).
    func waitForDrain(of partitions: Set<KafkaTopicPartition>?, until deadline: ContinuousClock.Instant) async {
        guard self.deadline(deadline, orShutdown: .drain) > .now else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    if self.state.withLock({ $0.waitForDrain(of: partitions, continuation) }) {
                        continuation.resume()
                    }
                }
            }
            group.addTask {
                _ = await self.sleep(until: deadline, orShutdown: .drain)
                let waiters = self.state.withLock { $0.cancelDrainWait { $0 == partitions } }
                if !waiters.isEmpty {
                    self.logger.warning(
                        "\(waiters.count) drain wait(s) timed out; events still in flight will be read again")
                }
                for waiter in waiters { waiter.resume() }
            }
            await group.next()
            group.cancelAll()
        }
    }

    func endAllLeases() {
        for lease in state.withLock({ $0.allLeases }) { lease.end() }
    }

    /// Every second: the blocked-topic limit, whether Kafka takes results, and liveness.
    func ticker(consumer: KafkaConsumer, producer: KafkaProducer, publisher: ResultPublisher) async {
        var watch = LivenessWatch()
        var acknowledgement = AcknowledgementWatch()
        while !Task.isCancelled {
            guard (try? await Task.sleep(for: .seconds(1))) != nil else { return }
            checkBlockedTopics()
            let unacknowledged = producer.pendingCount
            switch acknowledgement.tick(acknowledged: publisher.acknowledged, unacknowledged: unacknowledged) {
            case .waiting(let seconds): observer.resultsWaiting(unacknowledged: unacknowledged, for: seconds)
            case .acceptedAgain: observer.resultsAccepted()
            case .unchanged: break
            }
            let pending = state.withLock { $0.running > 0 } || consumer.bufferedCount > 0
            let waitingForKafka = unacknowledged > 0 && producer.sincePolled <= watch.pollStall
            if watch.alive(
                steps: progress.value, pending: pending, sincePolled: consumer.sincePolled,
                waitingForKafka: waitingForKafka)
            {
                observer.heartbeat()
            }
        }
    }

    /// The only place offsets are committed: requests are served one at a time, so a commit
    /// computed earlier can never land after (and undo) a later one. Each commit carries, as the
    /// offset's metadata, the records above it that are done too (`CommitMetadata`).
    func commitLoop(consumer: KafkaConsumer) async {
        // What the broker takes (its offset.metadata.max.bytes may be below the default).
        var metadataBudget = configuration.commitMetadataMaxBytes
        while let request = await commits.next() {
            let selection: Set<KafkaTopicPartition>?
            switch request {
            case .soon:
                selection = nil
                commits.commitStarting()
            case .partitions(let partitions, _): selection = partitions
            }
            let candidates = state.withLock { $0.commitCandidates(in: selection) }
            var outcome = CommitQueue.Outcome.stored
            if !candidates.isEmpty {
                do {
                    let began = ContinuousClock.now
                    try await consumer.commit(offsets(candidates, metadataBytes: metadataBudget))
                    let committed = ContinuousClock.now
                    try await keepProgress(candidates, consumer: consumer, metadataBytes: metadataBudget)
                    state.withLock { $0.markCommitted(candidates) }
                    observer.committed(ok: true)
                    logger.debug(
                        "committed \(candidates.map { "\($0.partition)@\($0.offset)+\($0.done.count)" }.joined(separator: ",")): offsets in \(committed - began), progress kept in \(ContinuousClock.now - committed)"
                    )
                } catch let error as KafkaError where error.code == .offsetMetadataTooLarge && metadataBudget > 0 {
                    observer.committed(ok: false)
                    outcome = .worthRetrying
                    metadataBudget = metadataBudget >= 128 ? metadataBudget / 2 : 0
                    logger.warning(
                        "the broker refuses this much commit metadata (its offset.metadata.max.bytes is lower); writing at most \(metadataBudget) bytes"
                    )
                    commits.retryLater()
                } catch {
                    observer.committed(ok: false)
                    let passing: Set<KafkaError.Code> = [
                        .notCoordinator, .coordinatorNotAvailable, .requestTimedOut, .timedOut, .transport,
                    ]
                    outcome =
                        (error as? KafkaError).map { passing.contains($0.code) } == true ? .worthRetrying : .refused
                    logger.warning("commit failed: \(error)")
                    commits.retryLater()
                }
            }
            if case .partitions(_, let done) = request { done(outcome) }
        }
    }

    /// After a commit: where the broker keeps no commit metadata, the done records go to the
    /// progress topic (and are stored before this returns). The first commit with done records
    /// finds out which broker this is.
    private func keepProgress(
        _ candidates: [CommitCandidate], consumer: KafkaConsumer, metadataBytes: Int
    ) async throws {
        guard let sample = candidates.first(where: { !$0.done.isEmpty }) else { return }
        var store = progressStore.withLock { $0 }
        if store == .unknown {
            let stored = try await consumer.committed([sample.partition])[sample.partition]
            let kept =
                stored?.metadata.map { (try? CommitMetadata.decode($0, committed: sample.offset)) != nil } ?? false
            store = kept ? .commitMetadata : progressTopic == nil ? .none : .progressTopic
            progressStore.withLock { $0 = store }
            observer.progressStore(store)
            switch store {
            case .commitMetadata, .unknown: break
            case .progressTopic:
                logger.info(
                    "the broker drops commit metadata: done records above committed offsets go to \(progressTopic?.topic ?? "")"
                )
            case .none:
                logger.warning(
                    "the broker drops commit metadata and delivery.progressTopic is not set: after a crash or a hand-over, events finished above one still waiting are pushed again"
                )
            }
        }
        guard store == .progressTopic, let progressTopic, let producer = producerBox.withLock({ $0 }) else {
            return
        }
        let records = try await progressTopic.records(candidates, metadataBytes: metadataBytes)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for record in records {
                group.addTask { _ = try await producer.send(record) }
            }
            try await group.waitForAll()
        }
    }

    /// Where done records go to the progress topic (a broker that drops commit metadata, and refuses
    /// commits while its group rebalances, as Tansu 0.6 does): a revocation that could not commit
    /// still leaves what it finished there, said against the offset the broker has, so the next
    /// owner does not push it again. Best effort, bounded by `deadline`.
    func keepProgressUncommitted(
        _ partitions: Set<KafkaTopicPartition>, until deadline: ContinuousClock.Instant
    ) async {
        guard progressStore.withLock({ $0 }) == .progressTopic, let progressTopic,
            let producer = producerBox.withLock({ $0 })
        else { return }
        let candidates = state.withLock { $0.doneSinceLastStored(partitions) }
        guard !candidates.isEmpty else { return }
        let logger = self.logger
        let metadataBytes = configuration.commitMetadataMaxBytes
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = ResumeOnce(continuation)
            let timer = Task {
                guard await self.sleep(until: deadline, orShutdown: .end) else { return }
                once.resume(())
            }
            Task {
                do {
                    let records = try await progressTopic.records(candidates, metadataBytes: metadataBytes)
                    for record in records { _ = try await producer.send(record) }
                } catch {
                    logger.warning(
                        "could not keep the revoked partitions' done records in \(progressTopic.topic): \(error)")
                }
                timer.cancel()
                once.resume(())
            }
        }
    }

    /// The candidates as offsets to commit, each with its done records as metadata of at most
    /// `metadataBytes` (0: none).
    private func offsets(_ candidates: [CommitCandidate], metadataBytes: Int) -> [KafkaTopicPartitionOffset] {
        candidates.map { candidate in
            guard metadataBytes > 0 else {
                if !candidate.done.isEmpty { observer.commitMetadataOmitted(Int(candidate.done.count)) }
                return candidate.position
            }
            let (text, omitted) = CommitMetadata(committed: candidate.offset, done: candidate.done).encoded(
                maxBytes: metadataBytes)
            if omitted > 0 { observer.commitMetadataOmitted(Int(omitted)) }
            return KafkaTopicPartitionOffset(candidate.partition, offset: candidate.offset, metadata: text)
        }
    }
}
