import APNs
import Foundation
import Kafka

@testable import Worker

/// A member's shell, step by step: what `WorkerPipeline` does around its machine.
extension WorkerSimulation {
    // MARK: assignment and revocation (WorkerPipeline+Rebalance)

    /// The group gives these partitions to the member: it reads what is known done (the committed
    /// offsets' metadata or the progress topic, refused where untrue, plus what it owes itself),
    /// then the machine takes the new leases.
    mutating func assign(_ partitions: [Int32], to index: Int) {
        let instance = members[index].instance
        for partition in partitions { kafka.owner[partition] = instance }
        members[index].tenure += 1
        let kafkaPartitions = partitions.map(SimulatedKafka.partition)
        let committed = kafka.committedOffsets(partitions)
        let fromTopic = kafka.dropsMetadata ? kafka.progressRecords(for: committed) : [:]
        let (read, _) = KnownProgress.read(committed: committed, fromTopic: fromTopic)
        let owed = members[index].machine.takeOwed(kafkaPartitions)
        let starting = StartingProgress(
            partitions: kafkaPartitions, committed: committed.mapValues(\.offset), read: read, owed: owed,
            bounds: DoneRecordBounds(maxInFlight: settings.maxInFlight, maxParked: nil))
        // Every end is known at once here: the simulation has no broker that answers late.
        let ends = Dictionary(uniqueKeysWithValues: kafkaPartitions.map { ($0, kafka.logs[$0.partition]!.end) })
        let decision = starting.decided(ends: ends)
        for refused in decision.refused {
            counted("done-records-refused")
            ledger.knowledgeDropped.insert(refused.partition.partition)
        }
        let progress = decision.progress
        for lease in members[index].machine.assign(kafkaPartitions, tenure: members[index].tenure, progress: progress) {
            lease.end()
        }
        for partition in partitions {
            let known = progress[SimulatedKafka.partition(partition)]
            note(
                "member \(instance) assigned \(partition) (tenure \(members[index].tenure)): starts knowing \(known.map { "\($0.committed)+[\($0.done)]" } ?? "nothing")"
            )
            checkAssigned(partition, known: known, member: members[index])
            members[index].positions[partition] =
                known?.committed ?? committed[SimulatedKafka.partition(partition)]?.offset ?? 0
        }
    }

    /// The group takes partitions away (`lost`: the member was thrown out, the group has moved on).
    mutating func revoke(_ partitions: Set<Int32>, from index: Int, lost: Bool, next: Int?) {
        members[index].tenure += 1
        for lease in members[index].machine.revoke(partitions.map(SimulatedKafka.partition)) {
            lease.handOver()
        }
        for partition in partitions { members[index].positions[partition] = nil }
        // The scheduler's waits of a handed-over lease are cancelled: those events are abandoned.
        for eventIndex in members[index].events.indices.reversed() {
            let event = members[index].events[eventIndex]
            guard case .waitingRetry = event.phase, !event.lease.isActive else { continue }
            abandon(eventIndex, of: index)
        }
        if lost {
            members[index].generation += 1
            for partition in partitions where kafka.owner[partition] == members[index].instance {
                kafka.owner[partition] = nil
                unowned[partition] = now
            }
        }
        members[index].revocations.append(
            SimulatedMember.Revocation(
                partitions: partitions, lost: lost, deadline: now + settings.revocationTimeout, phase: .draining,
                next: next))
    }

    /// A revocation's next step: drained (bounded), then committed (bounded, tried again), then the
    /// partitions are forgotten and, for a graceful one, given to the next owner.
    mutating func advanceRevocations(of index: Int) {
        var revocationIndex = 0
        while revocationIndex < members[index].revocations.count {
            var revocation = members[index].revocations[revocationIndex]
            var finished = false
            switch revocation.phase {
            case .draining:
                if members[index].inFlight(in: revocation.partitions) == 0 || now >= revocation.deadline {
                    if now >= revocation.deadline { counted("drain-timed-out") }
                    if revocation.lost {
                        finished = true
                    } else {
                        revocation.phase = .committing
                        revocation.deadline = now + settings.revocationTimeout
                    }
                }
            case .committing:
                let candidates = members[index].machine.commitCandidates(
                    in: Set(revocation.partitions.map(SimulatedKafka.partition)))
                if candidates.isEmpty {
                    finished = true
                } else if now >= revocation.deadline {
                    counted("revocation-commit-gave-up")
                    finished = true
                } else if members[index].commit == nil {
                    startCommit(candidates, of: index, revocation: revocation.partitions)
                    revocation.phase = .waitingForCommit
                }
            case .waitingForCommit:
                if members[index].commit?.revocation != revocation.partitions {
                    revocation.phase = .committing  // landed or refused: look again
                }
            }
            if finished {
                members[index].revocations.remove(at: revocationIndex)
                endRevocation(revocation, of: index)
            } else {
                members[index].revocations[revocationIndex] = revocation
                revocationIndex += 1
            }
        }
    }

    private mutating func endRevocation(_ revocation: SimulatedMember.Revocation, of index: Int) {
        note(
            "member \(members[index].instance) ends its revocation of \(revocation.partitions.sorted())\(revocation.lost ? " (lost)" : "")"
        )
        for lease in members[index].machine.forget(revocation.partitions.map(SimulatedKafka.partition)) {
            lease.end()
        }
        let instance = members[index].instance
        for partition in revocation.partitions.sorted() where !members[index].owned.contains(partition) {
            guard !revocation.lost, kafka.owner[partition] == instance else { continue }
            kafka.owner[partition] = nil
            if let next = revocation.next, let nextIndex = memberIndex(next), members[nextIndex].stop == nil,
                members[nextIndex].revocations.isEmpty
            {
                assign([partition], to: nextIndex)
            } else {
                unowned[partition] = now
            }
        }
    }

    // MARK: the reader and the events (WorkerPipeline+Event, EventRun)

    mutating func advance(member index: Int) {
        fetch(index)
        read(index)
        advanceEvents(of: index)
        advanceRevocations(of: index)
        advanceCommits(of: index)
        advanceStop(of: index)
    }

    private mutating func fetch(_ index: Int) {
        guard random.chance(0.7) else { return }  // a fetch that stalls this step
        for partition in members[index].positions.keys.sorted() {
            let from = members[index].positions[partition]!
            let records = kafka.fetch(partition, from: from, limit: random.int(1...5))
            for offset in records {
                members[index].buffer.append((RecordID(partition: partition, offset: offset), members[index].tenure))
            }
            if let last = records.last { members[index].positions[partition] = last + 1 }
        }
    }

    private mutating func read(_ index: Int) {
        while !members[index].buffer.isEmpty, !members[index].machine.inputHeld, members[index].stop == nil {
            let (record, tenure) = members[index].buffer.removeFirst()
            let partition = SimulatedKafka.partition(record.partition)
            guard let lease = members[index].machine.lease(of: partition, readIn: tenure) else { continue }
            switch members[index].machine.admit(partition, offset: record.offset, lease: lease) {
            case .run(_, let refusedKnownDone):
                // The simulation's done records are all true: reading never shows one untrue.
                if refusedKnownDone {
                    ledger.violation(
                        "step \(step): member \(members[index].instance) read more records not done inside \(partition.partition)'s done records than a writer can leave"
                    )
                }
                note("member \(members[index].instance) runs \(record)")
                members[index].events.append(
                    SimulatedMember.Event(
                        record: record, lease: lease, phase: .sending(at: now + Int64(random.int(0...5)))))
            case .skip:
                note("member \(members[index].instance) skips \(record)")
            case .alreadyDone:
                note("member \(members[index].instance) knows \(record) done")
            }
            if members[index].machine.running > settings.maxInFlight {
                ledger.violation(
                    "step \(step): \(members[index].machine.running) events running, the bound is \(settings.maxInFlight)"
                )
            }
        }
    }

    private mutating func advanceEvents(of index: Int) {
        var eventIndex = 0
        while eventIndex < members[index].events.count {
            var event = members[index].events[eventIndex]
            switch event.phase {
            case .sending(let at) where at <= now:
                guard event.lease.isActive else {
                    abandon(eventIndex, of: index)
                    continue
                }
                let answer = random.pick(answers)!
                event.phase = .atAPNs(
                    answerAt: now + Int64(random.int(1...(answer == .unanswered ? 200 : 60))), answer: answer)
            case .atAPNs(let at, let answer) where at <= now:
                event.result.attempts += 1
                if event.firstAttemptAt == nil { event.firstAttemptAt = at }
                if answer == .delivered {
                    note("member \(members[index].instance) delivers \(event.record)")
                    ledger.delivered(event.record, by: members[index].instance, step: step)
                }
                if answer == .unanswered { ledger.sentUnanswered(event.record) }
                event.phase = decide(answer, for: &event)
            case .waitingRetry(let until) where until <= now:
                guard event.lease.isActive else {
                    abandon(eventIndex, of: index)
                    continue
                }
                event.phase = .sending(at: now)
            case .publishing(let at) where at <= now:
                if now < resultsRefusedUntil {
                    event.phase = .publishing(ackAt: now + Int64(random.int(10...50)))
                } else {
                    finish(eventIndex, of: index)
                    continue
                }
            default:
                break
            }
            members[index].events[eventIndex] = event
            eventIndex += 1
        }
    }

    private var answers: [SimulatedMember.Answer] {
        [
            .delivered, .delivered, .delivered, .delivered, .refused, .retryable, .retryable, .lostBeforeSending,
            .unanswered, .expiredToken,
        ]
    }

    /// The worker's own decision (`AnswerDecision`) on the answer, with the simulation's clock and
    /// chance; its verdict becomes the event's next phase.
    private mutating func decide(_ answer: SimulatedMember.Answer, for event: inout SimulatedMember.Event)
        -> SimulatedMember.Phase
    {
        let attempt: SendAttempt
        switch answer {
        case .delivered: attempt = Self.answer(200)
        case .refused: attempt = Self.answer(400, .badDeviceToken)
        case .retryable: attempt = Self.answer(random.pick([429, 500, 503])!, nil)
        case .expiredToken: attempt = Self.answer(403, .expiredProviderToken)
        case .lostBeforeSending:
            attempt = Self.failure(APNsClientError(.connectFailed, "refused", mayHaveReachedAPNs: false))
        case .unanswered:
            attempt = Self.failure(APNsClientError(.deadlineExceeded, "no answer", mayHaveReachedAPNs: true))
        }
        let facts = AnswerDecision.Event(topic: "com.example.app", recipientKey: "\(event.record)", expiration: nil)
        let (time, firstAttempt) = (now, event.firstAttemptAt ?? now)
        var chance = random
        let decision = AnswerDecision.decide(
            attempt, result: event.result, tokenRefreshes: event.tokenRefreshes, event: facts,
            policy: settings.retryPolicy, now: { Date(timeIntervalSince1970: 1_800_000_000 + Double(time) / 1000) },
            elapsed: { .milliseconds(time - firstAttempt) },
            draw: { Int64.random(in: 0...$0, using: &chance) }, effect: { _ in })
        random = chance
        event.result = decision.result
        event.tokenRefreshes = decision.tokenRefreshes
        switch decision.verdict {
        case .final: return .publishing(ackAt: now + Int64(random.int(1...30)))
        case .retryNow: return .sending(at: now + Int64(random.int(1...5)))
        case .retry(let wait): return .waitingRetry(until: now + max(1, Int64(wait / .milliseconds(1))))
        }
    }

    private static func answer(_ status: Int, _ reason: APNsReason? = nil) -> SendAttempt {
        let response = APNsResponse(status: status, apnsID: nil, reason: reason)
        return SendAttempt(
            response: response, error: nil, outcome: .classify(response), credential: "app", duration: .zero)
    }

    private static func failure(_ error: APNsClientError) -> SendAttempt {
        SendAttempt(response: nil, error: error, outcome: .classify(error), credential: "app", duration: .zero)
    }

    private mutating func finish(_ eventIndex: Int, of index: Int) {
        let event = members[index].events.remove(at: eventIndex)
        note("member \(members[index].instance) ends \(event.record)")
        let partition = event.record.partition
        let tracked = members[index].machine.ownership.leases[SimulatedKafka.partition(partition)] === event.lease
        ledger.ended(
            event.record, instance: members[index].instance, tenure: event.lease.assignedIn, tracked: tracked,
            step: step)
        _ = members[index].machine.finish(
            SimulatedKafka.partition(partition), offset: event.record.offset, lease: event.lease)
    }

    mutating func abandon(_ eventIndex: Int, of index: Int) {
        let event = members[index].events.remove(at: eventIndex)
        note("member \(members[index].instance) abandons \(event.record)")
        counted("abandoned")
        _ = members[index].machine.abandon(
            SimulatedKafka.partition(event.record.partition), offset: event.record.offset, lease: event.lease)
    }
}
