import Foundation
import Testing

/// The worker's deterministic simulation (`WorkerSimulation`): `make test` runs seeds 1...1000;
/// `make simulate SEEDS=N` runs N seeds from `SIMULATION_FIRST_SEED` (1), and `make simulate SEED=s`
/// replays one, printing its every fault. A failing seed is printed with its step and what broke.
@Suite("Deterministic simulation of the worker's pipeline")
struct SimulationTests {
    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    static var seeds: [UInt64] {
        if let one = environment["SIMULATION_SEED"].flatMap(UInt64.init) { return [one] }
        let first = environment["SIMULATION_FIRST_SEED"].flatMap(UInt64.init) ?? 1
        let count = environment["SIMULATION_SEEDS"].flatMap(UInt64.init) ?? 1000
        return Array(first..<first + count)
    }

    /// The seeds run as two halves (odd and even), in parallel: one simulation is one thread's work,
    /// and the machines that run the tests have two cores or more.
    @Test(
        "every seed keeps the promises: no record lost, none pushed again that an owner knew was done, commits true, bounds kept",
        arguments: [0, 1])
    func seedsKeepThePromises(half: Int) {
        let seeds = Self.seeds.enumerated().filter { $0.offset % 2 == half }.map(\.element)
        guard !seeds.isEmpty else { return }
        let began = ContinuousClock.now
        var steps = 0
        var failures: [String] = []
        var totals: [String: Int] = [:]
        var pushedTwice = 0
        var records = 0
        for seed in seeds {
            var simulation = WorkerSimulation(seed: seed, tracing: Self.seeds.count == 1)
            let violations = simulation.run()
            steps += simulation.step
            pushedTwice += simulation.ledger.pushedTwice
            records += simulation.kafka.partitions.reduce(0) { $0 + simulation.kafka.logs[$1]!.records.count }
            for (name, count) in simulation.counts { totals[name, default: 0] += count }
            if let first = violations.first {
                failures.append("seed \(seed): \(first) [\(simulation.describe)] (replay: make simulate SEED=\(seed))")
            }
            if let trace = simulation.trace {
                print(
                    trace.lines.suffix(Self.environment["SIMULATION_TRACE_LINES"].flatMap(Int.init) ?? 400).joined(
                        separator: "\n"))
                print(simulation.describe)
            }
        }
        print(
            "simulation, half \(half + 1) of 2: \(seeds.count) seeds, \(steps) steps, \(records) records, \(pushedTwice) pushed twice, in \(ContinuousClock.now - began); "
                + totals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        for failure in failures.prefix(10) { print("FAILED \(failure)") }
        #expect(failures.isEmpty, "\(failures.count) of \(seeds.count) seeds broke a promise")
    }
}

extension WorkerSimulation {
    var describe: String {
        "\(settings.partitions) partitions, \(settings.members) members, maxInFlight \(settings.maxInFlight), \(settings.dropsMetadata ? "metadata dropped (progress topic)" : "metadata kept, \(settings.metadataMaxBytes) bytes"); "
            + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}
