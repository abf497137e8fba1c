@testable import Worker

/// The promises, checked against the ledger (what the simulation saw happen), never against what
/// the code under test says of itself.
extension WorkerSimulation {
    /// After every step: bounds.
    mutating func checkStep() {
        for member in members where member.machine.running > settings.maxInFlight {
            ledger.violation(
                "step \(step): member \(member.instance) runs \(member.machine.running) events, the bound is \(settings.maxInFlight)"
            )
        }
    }

    /// A commit was stored: every record below its offset, and every record its done ranges name,
    /// has a result.
    mutating func checkCommitted(_ partition: Int32) {
        guard let (offset, done) = kafka.coverage(of: partition) else { return }
        for record in kafka.logs[partition]!.records {
            guard record < offset || done.contains(record) else { continue }
            if !ledger.hasEnded(RecordID(partition: partition, offset: record)) {
                let why = record < offset ? "below the committed offset \(offset)" : "named done in its metadata"
                ledger.violation("step \(step): \(partition)@\(record) has no result but is \(why)")
                return
            }
        }
    }

    /// A member starts a partition from `known`: what it thinks is done must be done, and it must
    /// know at least what the group stored (what it finished there itself, the ledger checks when it
    /// pushes). What it does not know and was delivered, or is at APNs now, may be pushed again.
    mutating func checkAssigned(_ partition: Int32, known: KnownProgress?, member: SimulatedMember) {
        let records = kafka.logs[partition]!.records
        let knownDone = { (offset: Int64) -> Bool in
            guard let known else { return false }
            return offset < known.committed || known.done.contains(offset)
        }
        for offset in records
        where knownDone(offset) && !ledger.hasEnded(RecordID(partition: partition, offset: offset)) {
            ledger.violation(
                "step \(step): member \(member.instance) starts \(partition) knowing \(partition)@\(offset) done; it has no result"
            )
            return
        }
        var expected = Set<Int64>()
        if let (offset, done) = kafka.coverage(of: partition) {
            expected.formUnion(records.filter { $0 < offset || done.contains($0) })
        }
        for offset in expected.sorted() where !knownDone(offset) {
            ledger.violation(
                "step \(step): member \(member.instance) starts \(partition) without knowing \(partition)@\(offset) is done (\(kafka.coverage(of: partition).map { "committed \($0.offset), done \($0.done)" } ?? "nothing committed"))"
            )
            return
        }
        var atAPNs = Set<RecordID>()
        for other in members {
            for event in other.events where event.record.partition == partition {
                if case .atAPNs = event.phase { atAPNs.insert(event.record) }
            }
        }
        ledger.allowAgain(
            records.filter { !knownDone($0) }.map { RecordID(partition: partition, offset: $0) }, atAPNs: atAPNs)
    }

    /// Where the broker drops metadata, the progress records of a commit with done records are
    /// written before it: from then on, whether the commit lands or the member crashes first, the
    /// next owner must find every record the commit says is done (said against the offset the broker
    /// has now). A commit without done records only moves the offset: a crash before it lands pushes
    /// again what it moved over, the commit window the crash promise allows.
    mutating func checkKeptBeforeCommitting(_ candidates: [CommitCandidate]) {
        for candidate in candidates where !candidate.done.isEmpty {
            let partition = candidate.partition.partition
            guard let (offset, done) = kafka.coverage(of: partition) else { continue }
            for record in kafka.logs[partition]!.records where record >= offset {
                guard record < candidate.offset || candidate.done.contains(record) else { continue }
                if !done.contains(record) {
                    ledger.violation(
                        "step \(step): a crash now would lose that \(partition)@\(record) is done: the commit being made says so, the progress topic does not (committed \(offset), done \(done))"
                    )
                    return
                }
            }
        }
    }

    /// A commit stored in full: the next owner reads back all it says.
    mutating func checkStored(_ candidate: CommitCandidate) {
        let partition = candidate.partition.partition
        guard let (offset, done) = kafka.coverage(of: partition) else { return }
        var expected = candidate.done
        expected.removeAll(below: offset)
        if offset != candidate.offset || done != expected {
            ledger.violation(
                "step \(step): \(partition) committed at \(candidate.offset) with \(candidate.done) done, read back as \(offset) with \(done)"
            )
        }
    }
}
