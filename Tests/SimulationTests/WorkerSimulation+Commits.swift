import Kafka

@testable import Worker

/// The one committer of each member (`WorkerPipeline.commitLoop`) and shutdown.
extension WorkerSimulation {
    mutating func advanceCommits(of index: Int) {
        if let commit = members[index].commit, commit.landsAt <= now {
            members[index].commit = nil
            land(commit, of: index)
        }
        guard members[index].commit == nil, now >= members[index].nextCommitAt,
            members[index].revocations.allSatisfy({ $0.phase != .committing })
        else {
            return
        }
        let candidates = members[index].machine.commitCandidates(in: nil)
        guard !candidates.isEmpty else { return }
        members[index].nextCommitAt = now + settings.commitInterval
        startCommit(candidates, of: index, revocation: nil)
    }

    /// Begins a commit: where the broker drops metadata, the progress topic's records first (for the
    /// candidate's offset, and said against the offset the broker has), as `keepProgress` writes them.
    mutating func startCommit(_ candidates: [CommitCandidate], of index: Int, revocation: Set<Int32>?) {
        var metadata: [Int32: (text: String?, omitted: Int64)] = [:]
        if kafka.dropsMetadata {
            let previous = members[index].machine.againstLastStored(candidates.filter { !$0.done.isEmpty })
            for candidate in candidates where !candidate.done.isEmpty {
                kafka.progress[candidate.partition.partition, default: []].append((candidate.offset, candidate.done))
                for earlier in previous where earlier.partition == candidate.partition {
                    kafka.progress[candidate.partition.partition, default: []].append((earlier.offset, earlier.done))
                }
            }
        }
        if kafka.dropsMetadata { checkKeptBeforeCommitting(candidates) }
        for candidate in candidates {
            let budget = members[index].metadataBudget
            if budget == 0 {
                metadata[candidate.partition.partition] = (nil, candidate.done.count)
            } else {
                let (text, omitted) = CommitMetadata(committed: candidate.offset, done: candidate.done).encoded(
                    maxBytes: budget)
                metadata[candidate.partition.partition] = (text, omitted)
            }
        }
        members[index].commit = SimulatedMember.CommitInFlight(
            candidates: candidates, metadata: metadata, landsAt: now + Int64(random.int(2...40)),
            revocation: revocation,
            generation: members[index].generation)
    }

    /// The broker answers a commit: refused when the member is no longer the partitions' owner (a
    /// lost assignment, a crash and restart), now and then for a passing reason (the coordinator
    /// moving), or for metadata over its limit; else stored, and the machine marks it committed. A
    /// commit sent before the member was thrown out is refused too (Kafka fences its generation),
    /// even once the member has joined again and owns the partitions.
    private mutating func land(_ commit: SimulatedMember.CommitInFlight, of index: Int) {
        let instance = members[index].instance
        if commit.generation != members[index].generation
            || commit.candidates.contains(where: { kafka.owner[$0.partition.partition] != instance })
        {
            counted("commit-fenced")
            return
        }
        if faultsOn, random.chance(0.1) {
            counted("commit-refused")
            return
        }
        let tooLong = commit.metadata.values.contains { ($0.text?.utf8.count ?? 0) > kafka.metadataMaxBytes }
        if tooLong {
            counted("metadata-too-large")
            let budget = members[index].metadataBudget
            members[index].metadataBudget = budget >= 128 ? budget / 2 : 0
            return
        }
        for candidate in commit.candidates {
            let partition = candidate.partition.partition
            let (text, omitted) = commit.metadata[partition]!
            if omitted > 0, !kafka.dropsMetadata { ledger.knowledgeDropped.insert(partition) }
            kafka.committed[partition] = SimulatedKafka.Stored(
                offset: candidate.offset, metadata: kafka.dropsMetadata ? nil : text)
            if omitted == 0, !kafka.dropsMetadata { checkStored(candidate) }
            note(
                "member \(instance) commits \(partition)@\(candidate.offset)+[\(candidate.done)]\(omitted > 0 ? " (\(omitted) omitted)" : "")"
            )
            checkCommitted(partition)
        }
        members[index].machine.markCommitted(commit.candidates)
    }

    /// SIGTERM: nothing more is read; what runs drains (bounded), what is done is committed
    /// (bounded), then the member leaves and its partitions go to the others.
    mutating func advanceStop(of index: Int) {
        guard var stop = members[index].stop, !stop.committed else { return }
        defer { members[index].stop = stop }
        if members[index].machine.running > 0, now < stop.drainUntil { return }
        if now >= stop.drainUntil, members[index].machine.running > 0 {
            counted("shutdown-drain-timed-out")
            for lease in members[index].machine.allLeases { lease.end() }
        }
        let candidates = members[index].machine.commitCandidates(in: nil)
        if !candidates.isEmpty, now < stop.commitUntil {
            if members[index].commit == nil { startCommit(candidates, of: index, revocation: nil) }
            return
        }
        stop.committed = true
        // What still runs (past the drain bound) dies with the process.
        processEnded(members[index], partitionsFreeAt: now)
        members[index].events = []
        members[index].revocations = []
    }
}
