import Foundation
import Kafka
import Logging
import ReliabilityMatrix
import TestPeers

// `make reliability`: every scenario of the reliability matrix on every broker it applies to, one
// bounded run each, then the table. Exits 1 when any row lost an event or failed its own check.
//
//   reliability [--quick] [--broker mock|tansu] [--backlog N] [--max-in-flight N] [--no-progress-topic]
//               [--group-protocol classic|consumer] [SCENARIO-NAME-PART ...]
//   reliability --rebalance-timing [scale|deploy|static] [--broker B] [--group-protocol P]
//   reliability --list      the scenarios, as a Markdown table

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--list") {
    // The scenarios as docs/reliability.md lists them.
    print("| scenario | area | brokers | what it shows |\n| --- | --- | --- | --- |")
    for scenario in Scenario.all {
        let brokers = scenario.brokers.map {
            $0 == .tansu && scenario.tansuStorage == .s3 ? "\($0) on S3" : $0.description
        }.joined(separator: ", ")
        print("| \(scenario.name) | \(scenario.area.rawValue) | \(brokers) | \(scenario.shows) |")
    }
    exit(0)
}
let quick = arguments.contains("--quick")
arguments.removeAll { $0 == "--quick" }
var brokers = Broker.allCases
if let index = arguments.firstIndex(of: "--broker"), index + 1 < arguments.count {
    brokers = [Broker(rawValue: arguments[index + 1])].compactMap { $0 }
    arguments.removeSubrange(index...(index + 1))
}
var scale: Scale = quick ? .quick : .full
if let index = arguments.firstIndex(of: "--backlog"), index + 1 < arguments.count,
    let backlog = Int(arguments[index + 1])
{
    scale.backlog = backlog  // the backlog scenarios' size (the two-worker burst's 40,000, say)
    arguments.removeSubrange(index...(index + 1))
}
if let index = arguments.firstIndex(of: "--max-in-flight"), index + 1 < arguments.count,
    let maxInFlight = Int(arguments[index + 1]), maxInFlight > 0
{
    scale.maxInFlight = maxInFlight  // the burst rows' workers (the worker's default 10,000, say)
    arguments.removeSubrange(index...(index + 1))
}
if arguments.contains("--no-progress-topic") {
    scale.progressTopic = false  // workers without delivery.progressTopic (Tansu: they refuse to start)
    arguments.removeAll { $0 == "--no-progress-topic" }
}
if let index = arguments.firstIndex(of: "--group-protocol"), index + 1 < arguments.count {
    guard let chosen = KafkaGroupProtocol(rawValue: arguments[index + 1]) else {
        FileHandle.standardError.write(Data("--group-protocol: classic or consumer\n".utf8))
        exit(2)
    }
    // The workers' group protocol; the next-generation one on the mock cluster only (Tansu lacks it).
    scale.groupProtocol = chosen
    if chosen == .consumer { brokers.removeAll { $0 == .tansu } }
    arguments.removeSubrange(index...(index + 1))
}
let filters = arguments.map { $0.lowercased() }
// A filter that is a scenario's whole name selects that one only ("SIGKILL under a burst, APNs at
// 20-200 ms" without its "with faults" row); any other, every scenario whose name contains it.
let names = Set(Scenario.all.map { $0.name.lowercased() })
let scenarios = Scenario.all.filter { scenario in
    let name = scenario.name.lowercased()
    return filters.isEmpty || filters.contains { names.contains($0) ? name == $0 : name.contains($0) }
}

// Quiet unless RELIABILITY_LOG names a level: the scenarios break things on purpose, and the
// workers (and librdkafka through them) say so at length.
let level = Logger.Level(rawValue: ProcessInfo.processInfo.environment["RELIABILITY_LOG"] ?? "")
LoggingSystem.bootstrap { label in
    guard let level else { return SwiftLogNoOpLogHandler() }
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = level
    return handler
}
var logger = Logger(label: "reliability")
logger.logLevel = level ?? .critical

// `--rebalance-timing [scale|deploy|static]`: the rebalance figures (docs/performance.md) instead of
// the matrix: each change on the brokers chosen, under the group protocol chosen (both when none).
if let index = arguments.firstIndex(of: "--rebalance-timing") {
    let wanted = index + 1 < arguments.count ? arguments[index + 1].lowercased() : ""
    let moves = RebalanceTiming.Move.allCases.filter { wanted.isEmpty || $0.rawValue.lowercased().contains(wanted) }
    let protocols: [KafkaGroupProtocol] =
        CommandLine.arguments.contains("--group-protocol") ? [scale.groupProtocol] : [.classic, .consumer]
    print(RebalanceTiming.header)
    for move in moves {
        for groupProtocol in protocols {
            for broker in brokers where groupProtocol == .classic || broker == .mock {
                let figures = await RebalanceTiming.measure(
                    move, broker: broker, groupProtocol: groupProtocol, logger: logger)
                FileHandle.standardOutput.write(Data((RebalanceTiming.line(figures) + "\n").utf8))
                FileHandle.standardError.write(Data(("  " + RebalanceTiming.detail(figures) + "\n").utf8))
            }
        }
    }
    exit(0)
}

let started = ContinuousClock.now
var rows: [MatrixRow] = []
for scenario in scenarios {
    for broker in scenario.brokers where brokers.contains(broker) {
        let row = await ReliabilityMatrix.run(scenario, on: broker, scale: scale, logger: logger)
        // One line per run as it ends (stdout is a pipe under make: write it through at once).
        FileHandle.standardOutput.write(Data((ReliabilityMatrix.line(row) + "\n").utf8))
        rows.append(row)
    }
}
let elapsed = ContinuousClock.now - started
print("")
print(ReliabilityMatrix.table(rows))
print("")
print("\(rows.count) runs in \(elapsed.components.seconds / 60) min \(elapsed.components.seconds % 60) s")
let failed = rows.filter { !$0.passed }
if failed.isEmpty {
    print("lost = 0 in every row")
} else {
    print("FAILED: \(failed.map { "\($0.scenario) (\($0.broker))" }.joined(separator: ", "))")
    exit(1)
}
