import Foundation
import Worker

extension Demo.Summary {
    /// The table `apns-worker demo` prints.
    package var report: String {
        var lines: [String] = []
        lines.append("apns-worker demo: \(events) events through the real pipeline")
        lines.append("  Kafka (librdkafka mock cluster)  \(bootstrapServers)")
        lines.append("  APNs (simulator, TLS + JWT)      \(simulatorAddress)")
        lines.append("")
        lines.append(row("outcome", "events", "expected", "avg attempts"))
        for outcome in ResultOutcome.allCases {
            let got = outcomes[outcome] ?? 0
            let want = expected[outcome] ?? 0
            let attemptsText = got > 0 ? String(format: "%.2f", Double(attempts[outcome] ?? 0) / Double(got)) : "-"
            lines.append(row(outcome.rawValue, "\(got)", "\(want)", attemptsText))
        }
        lines.append(row("total", "\(outcomes.values.reduce(0, +))", "\(expected.values.reduce(0, +))", ""))
        lines.append("")
        let sorted = latenciesMs.sorted()
        func percentile(_ p: Double) -> String {
            guard !sorted.isEmpty else { return "-" }
            return String(format: "%.1f ms", sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))])
        }
        lines.append(
            "latency, consumed → result acknowledged: p50 \(percentile(0.5)), p90 \(percentile(0.9)), "
                + "p99 \(percentile(0.99)), max \(sorted.last.map { String(format: "%.1f ms", $0) } ?? "-")")
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        lines.append(String(format: "all %d results acknowledged in %.2f s (group join included)", events, seconds))
        lines.append("\(retried) events needed more than one attempt (APNs answered 429, the worker backed off)")
        let letters = deadLetters.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        lines.append("results:      \(EmbeddedStack.resultsTopic) (one per event, keyed by event id)")
        lines.append("dead letters: \(EmbeddedStack.deadLetterTopic) (\(deadLetters.values.reduce(0, +)): \(letters))")
        if let broadcastChannel {
            lines.append(
                "broadcast:    channel \(broadcastChannel) created at start (channel management, No Message Stored); "
                    + "\(broadcasts.count) Live Activity updates through Kafka, \(broadcastsAccepted) accepted by the simulator"
            )
            for broadcast in broadcasts {
                lines.append(
                    "              \(broadcast.id): \(broadcast.outcome.rawValue), apns-request-id \(broadcast.requestID ?? "-")"
                )
            }
        }
        let answers = simulatorCounters.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(
            separator: ", ")
        lines.append("simulator answered: \(answers)")
        if let metricsPort { lines.append("metrics were at http://127.0.0.1:\(metricsPort)/metrics") }
        lines.append("")
        if isExpected {
            lines.append("every event ended as expected")
        } else {
            lines.append("UNEXPECTED: \(mismatches.prefix(10).joined(separator: "; "))")
        }
        return lines.joined(separator: "\n")
    }

    private func row(_ a: String, _ b: String, _ c: String, _ d: String) -> String {
        a.padding(toLength: 14, withPad: " ", startingAt: 0) + b.leftPadded(8) + c.leftPadded(10) + d.leftPadded(15)
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
