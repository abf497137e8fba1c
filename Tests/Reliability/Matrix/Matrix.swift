import Foundation
import Kafka
import Logging
import TestPeers

/// One way things go wrong, run as its own bounded run.
package struct Scenario: Sendable {
    package enum Area: String, Sendable { case kafka = "Kafka", apns = "APNs", process = "process" }

    package let name: String
    package let area: Area
    /// The brokers it applies to (mock-cluster fault injection has no Tansu equivalent).
    package let brokers: [Broker]
    /// What it shows, for docs/reliability.md.
    package let shows: String
    /// Brokers in the mock cluster.
    package var mockBrokers = 1
    /// Partitions of the input and results topics.
    package var partitions = 4
    /// Where Tansu keeps its data (`.s3` for the rows that restart the broker).
    package var tansuStorage: TansuBroker.Storage = .memory
    /// A second input topic, `Rig.urgentTopic`, that workers started with `lanes` consume as their
    /// urgent lane (`consumer.lanes.urgent`); the rig counts its events too.
    package var lanes = false
    /// How long the rig may take to settle once the scenario's actions are done.
    package var settleSeconds: Double = 180
    /// Sets up, starts workers and injects the fault; the rig then waits and counts.
    let run: @Sendable (Rig, Scale) async throws -> Void

    init(
        _ name: String, _ area: Area, brokers: [Broker] = Broker.allCases, mockBrokers: Int = 1, partitions: Int = 4,
        tansuStorage: TansuBroker.Storage = .memory, lanes: Bool = false, shows: String,
        run: @escaping @Sendable (Rig, Scale) async throws -> Void
    ) {
        self.name = name
        self.area = area
        self.brokers = brokers
        self.mockBrokers = mockBrokers
        self.partitions = partitions
        self.tansuStorage = tansuStorage
        self.lanes = lanes
        self.shows = shows
        self.run = run
    }
}

/// How big a run is: the full matrix, or the short one `make test` runs.
package struct Scale: Sendable {
    package var events: Int
    /// Long outages are cut to this fraction.
    package var outage: Double
    /// Repetitions (SIGKILLs).
    package var repeats: Int
    /// Events of a backlog that several workers share or hand over.
    package var backlog: Int
    /// Workers replaced one after the other in a rolling deploy.
    package var generations: Int
    /// The burst rows' `delivery.maxInFlight` per worker, where not their own 1,000 (`--max-in-flight`:
    /// the worker's default, 10,000, say).
    package var maxInFlight: Int?
    /// Workers configured with `delivery.progressTopic` (`--no-progress-topic`: without it, as on a
    /// broker that keeps commit metadata it needs none; on Tansu the worker then refuses to start).
    package var progressTopic = true
    /// The workers' consumer group protocol (`--group-protocol consumer`: the next-generation one, on
    /// the mock cluster only; Tansu does not speak it).
    package var groupProtocol: KafkaGroupProtocol = .classic

    package static let full = Scale(events: 2_000, outage: 1, repeats: 10, backlog: 10_000, generations: 3)
    package static let quick = Scale(events: 600, outage: 0.2, repeats: 3, backlog: 2_000, generations: 2)

    package func seconds(_ full: Double) -> Duration { .milliseconds(Int(full * outage * 1000)) }
}

/// One row of the table.
package struct MatrixRow: Sendable {
    package var scenario: String
    package var broker: Broker
    package var groupProtocol: KafkaGroupProtocol = .classic
    /// Tansu's storage (`.memory` for the mock cluster).
    package var storage: TansuBroker.Storage = .memory
    package var eventsIn = 0
    package var results = 0
    package var deadLetters = 0
    package var degradedDeadLetters = 0
    package var duplicates = 0
    /// Duplicates that are the same result published twice (not the event processed twice).
    package var republished = 0
    /// Events whose device push APNs (the simulator) accepted more than once, by `apns-id`.
    package var pushedTwice = 0
    /// Acceptances beyond the first, summed over those events (an event pushed three times adds 2).
    package var extraPushes = 0
    /// Accepted device pushes the simulator could not count (sent without an `apns-id`).
    package var untrackedPushes = 0
    /// Rows that SIGKILL workers: device pushes the simulator had accepted on the killed workers'
    /// connections and not yet answered at each kill, summed over the kills. Sent again whatever
    /// the worker does, so `extraPushes` cannot go below it.
    package var floor: Int?
    package var lost = 0
    package var recovery: Duration?
    package var elapsed: Duration = .zero
    /// The scenario's own check that failed, or the error that ended it.
    package var failure: String?

    package var passed: Bool { lost == 0 && failure == nil && eventsIn > 0 }
}

package enum ReliabilityMatrix {
    /// Runs one scenario on one broker: a fresh rig, the scenario, then the count.
    package static func run(_ scenario: Scenario, on broker: Broker, scale: Scale, logger: Logger) async -> MatrixRow {
        var row = MatrixRow(scenario: scenario.name, broker: broker)
        row.groupProtocol = scale.groupProtocol
        if broker == .tansu { row.storage = scenario.tansuStorage }
        let started = ContinuousClock.now
        let rig: Rig
        do {
            rig = try await Rig.start(
                broker: broker, mockBrokers: scenario.mockBrokers, partitions: scenario.partitions,
                tansuStorage: scenario.tansuStorage, lanes: scenario.lanes, progressTopic: scale.progressTopic,
                groupProtocol: scale.groupProtocol, logger: logger)
        } catch {
            row.failure = "the rig did not start: \(error)"
            return row
        }
        do {
            try await scenario.run(rig, scale)
        } catch {
            row.failure = "\(error)"
        }
        let measurement = await rig.settle(within: scenario.settleSeconds)
        await rig.shutdown()
        row.eventsIn = measurement.eventsIn
        row.results = measurement.results
        row.deadLetters = measurement.deadLetters
        row.degradedDeadLetters = measurement.degradedDeadLetters
        row.duplicates = measurement.duplicates
        row.republished = measurement.republished
        row.pushedTwice = measurement.pushedTwice
        row.extraPushes = measurement.extraPushes
        row.untrackedPushes = measurement.untrackedPushes
        row.floor = measurement.floor
        row.lost = measurement.lost
        row.recovery = measurement.recovery
        row.elapsed = ContinuousClock.now - started
        if row.lost > 0, row.failure == nil {
            row.failure =
                "\(measurement.inFlightAtEnd) event(s) still in flight in the in-process workers at the end; "
                + "a fresh reader found \(measurement.freshReaderResults.map(String.init) ?? "?") results in "
                + "\(measurement.freshReaderTotal.map(String.init) ?? "?") records (the watcher: "
                + "\(measurement.watcherTotal.map(String.init) ?? "?"))"
        }
        return row
    }

    package static let header =
        "| scenario | broker | events in | results out | dead letters | duplicates | pushed twice | lost "
        + "| time to recover | run |"

    package static func line(_ row: MatrixRow) -> String {
        let recovery = row.recovery.map { format($0) } ?? "-"
        let duplicates =
            row.republished > 0 ? "\(row.duplicates) (\(row.republished) republished)" : "\(row.duplicates)"
        let letters =
            row.degradedDeadLetters > 0
            ? "\(row.deadLetters) (\(row.degradedDeadLetters) reduced)" : "\(row.deadLetters)"
        var text =
            "| \(row.scenario) | \(row.broker)\(row.storage == .s3 ? " on S3" : "")\(row.groupProtocol == .consumer ? ", consumer protocol" : "") | \(row.eventsIn) | \(row.results) | \(letters) | \(duplicates) | "
            + "\(pushedTwice(row)) | \(row.lost) | \(recovery) | \(format(row.elapsed)) |"
        if let failure = row.failure { text += " FAILED: \(failure)" }
        return text
    }

    package static func table(_ rows: [MatrixRow]) -> String {
        ([header, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"] + rows.map(line)).joined(
            separator: "\n")
    }

    /// `312`, or with what else there is to read: `312 (330 extra, floor 280, 5 not counted)`.
    static func pushedTwice(_ row: MatrixRow) -> String {
        var notes: [String] = []
        if row.extraPushes != row.pushedTwice { notes.append("\(row.extraPushes) extra") }
        if let floor = row.floor { notes.append("floor \(floor)") }
        if row.untrackedPushes > 0 { notes.append("\(row.untrackedPushes) not counted") }
        return notes.isEmpty ? "\(row.pushedTwice)" : "\(row.pushedTwice) (\(notes.joined(separator: ", ")))"
    }

    static func format(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return String(format: "%.1f s", seconds)
    }
}
