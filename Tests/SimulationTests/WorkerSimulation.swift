import Kafka

@testable import Worker

/// A seeded, deterministic simulation of a group of workers on one input topic: records arriving,
/// fetches, assignments given, revoked, lost and given back, commits refused or cut short, a broker
/// that drops commit metadata, APNs answering every way the worker handles (delivered, refused,
/// retryable, connections lost before or after a request went out, answers that never come),
/// results refused for a while, members crashing and restarting from what was committed, SIGTERM.
/// Every choice comes from `SimulationRandom(seed:)`; after every step the promises are checked
/// (`checkStep`), and at the end, once faults stop and the group settles, that every record ended
/// and every partition's commit reached its end (`settle`). A failure names its seed and step:
/// `make simulate SEED=s` replays it.
struct WorkerSimulation {
    struct Settings {
        var partitions: Int32
        var members: Int
        var maxInFlight: Int
        var steps: Int
        var dropsMetadata: Bool
        var metadataMaxBytes: Int
        /// The worker's retry policy at the simulation's scale (milliseconds, not seconds).
        var retryPolicy: RetryPolicy {
            var policy = RetryPolicy()
            policy.maxAttempts = 4
            policy.initialBackoff = .milliseconds(10)
            policy.maxBackoff = .milliseconds(120)
            policy.maxRetryDuration = .seconds(5)
            return policy
        }
        /// Simulated milliseconds.
        var revocationTimeout: Int64 = 400
        var commitInterval: Int64 = 50
        var shutdownDrain: Int64 = 300
        var shutdownCommit: Int64 = 200
        var sessionTimeout: Int64 = 300

        /// Drawn from the seed: the shape of the run.
        init(random: inout SimulationRandom) {
            partitions = Int32(random.int(1...4))
            members = random.int(1...3)
            maxInFlight = random.pick([1, 2, 4, 16])!
            steps = random.int(150...500)
            dropsMetadata = random.chance(0.3)
            metadataMaxBytes = random.chance(0.15) ? random.int(20...80) : 4096
        }
    }

    let seed: UInt64
    var random: SimulationRandom
    let settings: Settings
    var kafka: SimulatedKafka
    var members: [SimulatedMember] = []
    var ledger = Ledger()
    /// Simulated time, milliseconds.
    var now: Int64 = 0
    var step = 0
    var nextInstance = 0
    /// Partitions waiting for an owner, since when (after a crash: the session timeout).
    var unowned: [Int32: Int64] = [:]
    /// Restarts due: a crashed or stopped process comes back at that time.
    var restarts: [Int64] = []
    /// Faults and events taken, by name (for the report).
    var counts: [String: Int] = [:]
    /// The producer refuses results until then (a blocked output topic).
    var resultsRefusedUntil: Int64 = -1
    /// Faults stop once the run's steps are done; then the group settles.
    var faultsOn = true
    /// What happened, step by step, when tracing (`make simulate SEED=s`).
    let trace: Trace?

    final class Trace {
        var lines: [String] = []
    }

    func note(_ text: @autoclosure () -> String) {
        trace?.lines.append("\(step) t=\(now): \(text())")
    }

    init(seed: UInt64, tracing: Bool = false) {
        self.seed = seed
        trace = tracing ? Trace() : nil
        random = SimulationRandom(seed: seed)
        settings = Settings(random: &random)
        kafka = SimulatedKafka(
            partitions: settings.partitions, dropsMetadata: settings.dropsMetadata,
            metadataMaxBytes: settings.metadataMaxBytes)
        for partition in kafka.partitions { unowned[partition] = 0 }
        for _ in 0..<settings.members { startMember() }
    }

    /// Runs the steps, then the settling; returns the violations (empty: every promise held).
    mutating func run() -> [String] {
        while step < settings.steps, ledger.violations.isEmpty {
            takeStep()
        }
        if ledger.violations.isEmpty { settle() }
        return ledger.violations
    }

    mutating func takeStep() {
        step += 1
        now += Int64(random.int(1...20))
        if faultsOn { injectFaults() }
        if faultsOn, random.chance(0.5) {
            let partition = random.pick(kafka.partitions)!
            kafka.append(to: partition, markerFirst: random.chance(0.1))
        }
        for time in restarts where time <= now { _ = time; startMember() }
        restarts.removeAll { $0 <= now }
        assignUnowned()
        for index in members.indices.reversed() {
            advance(member: index)
        }
        members.removeAll { $0.stop?.committed == true && $0.revocations.isEmpty && $0.events.isEmpty }
        checkStep()
    }

    /// Faults stop, every record written so far is given time to end and be committed: the group
    /// must reach the end of every partition with every record ended.
    mutating func settle() {
        faultsOn = false
        resultsRefusedUntil = -1
        if members.isEmpty { startMember() }
        var quiet = 0
        while quiet < 50, step < settings.steps + 5_000, ledger.violations.isEmpty {
            takeStep()
            let done = kafka.partitions.allSatisfy { partition in
                kafka.committed[partition]?.offset ?? 0 >= lastRecordEnd(partition)
            }
            quiet = done ? quiet + 1 : 0
        }
        for partition in kafka.partitions {
            for offset in kafka.logs[partition]!.records
            where !ledger.hasEnded(RecordID(partition: partition, offset: offset)) {
                ledger.violation("end: \(partition)@\(offset) never ended (no result)")
                return
            }
            let committed = kafka.committed[partition]?.offset ?? 0
            if committed < lastRecordEnd(partition) {
                ledger.violation(
                    "end: partition \(partition) committed at \(committed), its records end at \(lastRecordEnd(partition))"
                )
                return
            }
        }
    }

    /// One past the last record of the partition (offsets after it hold none).
    func lastRecordEnd(_ partition: Int32) -> Int64 {
        (kafka.logs[partition]!.records.last ?? -1) + 1
    }

    func count(_ name: String) -> Int { counts[name, default: 0] }

    mutating func counted(_ name: String) { counts[name, default: 0] += 1 }

    // MARK: the group

    mutating func startMember() {
        nextInstance += 1
        note("member \(nextInstance) starts")
        members.append(SimulatedMember(instance: nextInstance, maxInFlight: settings.maxInFlight))
    }

    func memberIndex(_ instance: Int) -> Int? { members.firstIndex { $0.instance == instance } }

    /// Partitions without an owner go to a member that is not stopping, once their wait is over.
    mutating func assignUnowned() {
        let ready = unowned.filter { $0.value <= now }.keys.sorted()
        guard !ready.isEmpty else { return }
        // A member in a revocation is in its rebalance handler: librdkafka calls the next one (this
        // assignment) only once it returns.
        let candidates = members.indices.filter { members[$0].stop == nil && members[$0].revocations.isEmpty }
        guard !candidates.isEmpty else { return }
        for partition in ready {
            let index = random.pick(candidates)!
            unowned[partition] = nil
            assign([partition], to: index)
        }
    }

    mutating func injectFaults() {
        var live: [Int] { members.indices.filter { members[$0].stop == nil && members[$0].revocations.isEmpty } }
        if random.chance(0.02), let from = random.pick(live), let partition = random.pick(members[from].owned.sorted()),
            let to = random.pick(live.filter { $0 != from }) ?? random.pick(live)
        {
            counted("revoked")
            note("revoke \(partition) from member \(members[from].instance) to \(members[to].instance)")
            revoke([partition], from: from, lost: false, next: members[to].instance)
        }
        if random.chance(0.008), let from = random.pick(live), let partition = random.pick(members[from].owned.sorted())
        {
            counted("lost")
            note("member \(members[from].instance) loses \(partition)")
            revoke([partition], from: from, lost: true, next: nil)
        }
        if random.chance(0.004), let index = random.pick(members.indices.map { $0 }) {
            counted("crashed")
            note("member \(members[index].instance) crashes")
            crash(index)
        }
        if random.chance(0.004), let index = random.pick(members.indices.filter { members[$0].stop == nil }) {
            counted("sigterm")
            note("member \(members[index].instance) gets SIGTERM")
            members[index].stop = SimulatedMember.Stop(
                drainUntil: now + settings.shutdownDrain,
                commitUntil: now + settings.shutdownDrain + settings.shutdownCommit)
            _ = members[index].machine.beginStopping(deadline: .now + .seconds(3600))
            restarts.append(now + Int64(random.int(50...400)))
        }
        if random.chance(0.01) {
            counted("results-refused")
            resultsRefusedUntil = now + Int64(random.int(20...300))
        }
        if live.count < 4, random.chance(0.003) {
            counted("member-added")
            startMember()
        }
    }

    /// The process dies: everything it held in memory is gone. What it had at APNs may have been
    /// delivered; its partitions go to others after the session timeout.
    mutating func crash(_ index: Int) {
        processEnded(members.remove(at: index), partitionsFreeAt: now + settings.sessionTimeout)
        restarts.append(now + Int64(random.int(50...600)))
    }

    /// A process ends, crashed or stopped: what it still had at APNs may have been delivered, and the
    /// group gives the partitions it owned to others from `time` on.
    mutating func processEnded(_ member: SimulatedMember, partitionsFreeAt time: Int64) {
        for event in member.events {
            if case .atAPNs = event.phase { ledger.sentUnanswered(event.record) }
        }
        for partition in member.owned.union(member.revoking) where kafka.owner[partition] == member.instance {
            kafka.owner[partition] = nil
            unowned[partition] = time
        }
    }
}
