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
    /// A step of a commit that the commit loop took (`commitStepForTesting`).
    package enum CommitStep: Sendable {
        /// The done records of these candidates are in the progress topic (where it is used).
        case progressKept([CommitCandidate])
        /// These candidates' offsets are committed.
        case committed([CommitCandidate])
    }

    /// Tests: called by the commit loop after each step of a commit, which waits for it (a test
    /// looks at what a crash at that moment would leave).
    package func onCommitStepForTesting(_ body: (@Sendable (CommitStep) async -> Void)?) {
        commitStepForTesting.withLock { $0 = body }
    }

}

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
                steps: steps.value, pending: pending, sincePolled: consumer.sincePolled,
                waitingForKafka: waitingForKafka)
            {
                observer.heartbeat()
            }
        }
    }

    /// The only place offsets are committed: requests are served one at a time, so a commit
    /// computed earlier can never land after (and undo) a later one. Each commit carries, as the
    /// offset's metadata, the records above it that are done too (`CommitMetadata`); where the
    /// broker drops metadata they go to the progress topic first (`keepProgress`), so that a crash
    /// between the two finds them whether the commit landed or not.
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
            let (candidates, previous) = state.withLock { state in
                let candidates = state.commitCandidates(in: selection)
                return (candidates, state.againstLastStored(candidates.filter { !$0.done.isEmpty }))
            }
            var outcome = CommitQueue.Outcome.stored
            if !candidates.isEmpty {
                do {
                    let began = ContinuousClock.now
                    try await keepProgress(candidates, previous: previous, metadataBytes: metadataBudget)
                    await commitStepForTesting.withLock({ $0 })?(.progressKept(candidates))
                    let kept = ContinuousClock.now
                    try await consumer.commit(offsets(candidates, metadataBytes: metadataBudget))
                    await commitStepForTesting.withLock({ $0 })?(.committed(candidates))
                    state.withLock { $0.markCommitted(candidates) }
                    observer.committed(ok: true)
                    logger.debug(
                        "committed \(candidates.map { "\($0.partition)@\($0.offset)+\($0.done.count)" }.joined(separator: ",")): progress kept in \(kept - began), offsets in \(ContinuousClock.now - kept)"
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

    /// Before the first record: where the done records above committed offsets are kept. A broker
    /// that keeps commit metadata keeps them there; one that drops it (`CommitMetadataProbe`) needs
    /// `delivery.progressTopic`, and without one the pipeline does not start
    /// (`PipelineError.brokerDropsCommitMetadata`): it would push again, after every crash or
    /// hand-over, what finished above an event still waiting. A broker that does not answer is asked
    /// again every 2 s (the pipeline beats meanwhile: a Kafka outage at start is not a stuck worker);
    /// `nil` once a stop has begun.
    func findProgressStore() async throws -> ProgressStore? {
        // librdkafka's own lines (a TLS handshake refused, a broker down) are logged as the consumer's
        // would be: until the probe is answered, they are all there is to say why nothing is read.
        let observer = self.observer
        let probe = try CommitMetadataProbe(
            consumerConfiguration, partition: KafkaTopicPartition(topic: configuration.inputTopics[0], partition: 0),
            logger: logger, onError: { observer.kafkaFailing($0) })
        defer { probe.close() }
        var warned = false
        while !isStopping {
            observer.heartbeat()
            switch await probe.answer(within: .seconds(2)) {
            case .success(true):
                return .commitMetadata
            case .success(false):
                guard let progressTopic else { throw PipelineError.brokerDropsCommitMetadata }
                logger.info(
                    "the broker drops commit metadata: done records above committed offsets go to \(progressTopic.topic)"
                )
                return .progressTopic
            case .failure(let error as KafkaError) where error.isAuthorizationFailure:
                let group = CommitMetadataProbe.group(consumerConfiguration.groupID)
                guard progressTopic != nil else { throw PipelineError.progressProbeRefused(group: group, error) }
                logger.warning(
                    "could not find out whether the broker keeps commit metadata (group \(group): \(error)); done records go to delivery.progressTopic as well"
                )
                return .progressTopic
            case .failure(let error):
                if !warned {
                    logger.warning(
                        "could not find out whether the broker keeps commit metadata: \(error); asking again")
                    warned = true
                }
                _ = await sleep(until: .now + .seconds(2), orShutdown: .drain)
            case nil:
                if !warned {
                    logger.warning("waiting for the broker to answer before reading: is the broker reachable?")
                    warned = true
                }
            }
        }
        return nil
    }

    /// Before a commit, where the broker keeps no commit metadata: the done records go to the
    /// progress topic, and are stored before this returns. For each candidate with done records,
    /// first one written for its offset, then (`previous`, where the commit moves the offset) one
    /// written for the offset the broker has now, saying everything from there done too. The next
    /// owner trusts only a record written for the committed offset, the newest such: whether the
    /// commit then lands (the second record is older than the offset, passed over; the first is
    /// used) or a crash comes first (the second is used), it finds every done record of the commit.
    /// Written after the commit, as before, a crash between the two left the committed offset
    /// without its record, and everything done above it was pushed again. Both records of a
    /// partition go in that order, next to each other into the producer's queue (same key, same
    /// progress partition, one batch as a rule). Should they not be stored, nothing is committed
    /// (the commit is tried again).
    private func keepProgress(_ candidates: [CommitCandidate], previous: [CommitCandidate], metadataBytes: Int)
        async throws
    {
        guard candidates.contains(where: { !$0.done.isEmpty }) else { return }
        guard progressStore.withLock({ $0 }) == .progressTopic, let progressTopic,
            let producer = producerBox.withLock({ $0 })
        else {
            return
        }
        let previous = Dictionary(previous.map { ($0.partition, $0) }) { first, _ in first }
        let ordered = candidates.filter { !$0.done.isEmpty }.flatMap {
            [$0] + [previous[$0.partition]].compactMap { $0 }
        }
        let records = try await progressTopic.records(ordered, metadataBytes: metadataBytes)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for record in records {
                // Enqueued here, in order; each task waits for its record's delivery.
                let delivered = AsyncThrowingStream<Void, any Error>.makeStream()
                try await producer.send(record) { result in
                    switch result {
                    case .success: delivered.continuation.finish()
                    case .failure(let error): delivered.continuation.finish(throwing: error)
                    }
                }
                group.addTask { for try await _ in delivered.stream {} }
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
