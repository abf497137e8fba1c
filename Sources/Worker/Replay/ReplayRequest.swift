import Foundation

/// What `apns-worker replay` should put back.
package struct ReplayRequest: Sendable {
    /// The dead-letter topic to read.
    package var deadLetterTopic: String
    /// Where to produce; `nil` sends each dead letter back to its `dlq-source-topic`.
    package var targetTopic: String?
    /// Only dead letters with one of these `dlq-reason` values (empty: `replayableByDefault`).
    package var reasons: Set<DeadLetterReason> = []
    /// Only dead letters whose `dlq-last-failure-at` is at or after / before these times.
    package var since: Date?
    package var until: Date?
    /// Only dead letters that came from one of these topics (empty: all).
    package var sourceTopics: Set<String> = []
    /// Report what would be replayed, produce nothing.
    package var dryRun = false
    /// A dead letter already replayed this many times is refused: a poison event cannot loop forever.
    package var maxReplays = ReplayRequest.defaultMaxReplays
    package static let defaultMaxReplays = 3
    /// Ignore what earlier runs replayed and read the dead-letter topic from its beginning again.
    package var fromBeginning = false

    /// The reasons a replay can fix (the credential, the configuration, APNs' availability), replayed
    /// when none is named. An event that is not JSON, fails the schema or breaks a rule fails the
    /// same way every time: those are replayed only when named (after changing the schema, say).
    package static let replayableByDefault: Set<DeadLetterReason> = [.credentials, .noCredential, .retriesExhausted]

    /// The reasons this run replays.
    package var effectiveReasons: Set<DeadLetterReason> { reasons.isEmpty ? Self.replayableByDefault : reasons }

    package init(deadLetterTopic: String) {
        self.deadLetterTopic = deadLetterTopic
    }
}

/// What a replay did, by reason and destination.
package struct ReplayReport: Sendable, Equatable {
    package enum Action: String, Sendable, Hashable, CaseIterable {
        case replayed
        case wouldReplay = "would replay"
        /// Left alone by the filters.
        case filtered
        /// Replayed by an earlier run (behind its reason's cursor): not again unless --from-beginning.
        case replayedBefore = "skipped: replayed before"
        /// Replayed too often already (`dlq-replay-count` at the limit).
        case refusedLimit = "refused: replay limit"
        /// No `dlq-source-topic` and no target topic given: nowhere to send it.
        case noDestination = "refused: no destination"
    }

    package struct Row: Sendable, Hashable, Comparable {
        package var action: Action
        package var reason: String
        package var destination: String

        package static func < (lhs: Row, rhs: Row) -> Bool {
            (lhs.action.rawValue, lhs.reason, lhs.destination) < (rhs.action.rawValue, rhs.reason, rhs.destination)
        }
    }

    /// Dead letters read (up to the end offsets seen at the start).
    package var scanned = 0
    package var counts: [Row: Int] = [:]
    /// Of each row's dead letters, those that had been replayed before (`dlq-replay-count` above 0)
    /// and failed again: a loop, which a cron job's output should show.
    package var failedAgain: [Row: Int] = [:]
    /// What the operator should know beyond the counts (cursor metadata that could not be used, a
    /// broker that keeps none), a line each.
    package var notes: [String] = []

    package func count(_ action: Action) -> Int {
        counts.filter { $0.key.action == action }.reduce(0) { $0 + $1.value }
    }

    /// A plain-text table, one row per (action, reason, destination); `failed again` counts the
    /// row's dead letters that had been replayed before.
    package var table: String {
        var lines = [pad("action", 24) + pad("reason", 20) + pad("destination", 32) + pad("count", 8) + "failed again"]
        for (row, count) in counts.sorted(by: { $0.key < $1.key }) {
            lines.append(
                pad(row.action.rawValue, 24) + pad(row.reason, 20) + pad(row.destination, 32) + pad(String(count), 8)
                    + String(failedAgain[row] ?? 0))
        }
        lines.append("scanned \(scanned) dead letters")
        let again = failedAgain.filter { [.replayed, .wouldReplay].contains($0.key.action) }.values.reduce(0, +)
        if again > 0 {
            lines.append(
                "note: \(again) of the dead letters \(dryRunWording) had failed again after an earlier replay: "
                    + "fix what their reason's runbook says before replaying them, or they loop until --max-replays")
        }
        lines += notes.map { "note: " + $0 }
        return lines.joined(separator: "\n")
    }

    private var dryRunWording: String { count(.wouldReplay) > 0 ? "this run would replay" : "replayed" }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
