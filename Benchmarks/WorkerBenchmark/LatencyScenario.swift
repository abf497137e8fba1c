import Foundation

/// Open loop (`OpenLoop`): fresh peers and one worker per round, every rate in turn.
@MainActor func runLatencyScenario() async throws {
    print(
        "Latency against offered load on \(Peers.broker): rates \(offeredRates.map { Int($0) }) events/s, "
            + "\(Int(stepSeconds)) s each, \(rounds) round(s), APNs connections "
            + (connections > 0 ? "\(connections)" : "default") + ", maxInFlight "
            + (maxInFlight > 0 ? "\(maxInFlight)" : "default"))
    for round in 0..<rounds {
        let topic = "bench-results-latency-\(round)"
        let peersChild = try Child(["--peers", topic])
        var peers = Peers.Addresses()
        while let line = peersChild.readLine(), !peers.read(line) {}
        guard peers.simulatorPort > 0 else { throw BenchmarkFailure("the peers did not start") }
        let workerArguments = [
            "--worker", Mode.worker.rawValue, "bench-latency-\(round)", topic, "\(maxInFlight)", peers.bootstrap,
            "\(peers.simulatorPort)", peers.caFile, peers.keyFile,
        ]
        var worker: Child?
        let steps = try await OpenLoop.run(
            rates: offeredRates, seconds: stepSeconds, bootstrap: peers.bootstrap, resultsTopic: topic, logger: logger
        ) {
            let child = try Child(workerArguments, wrapper: workerWrapper)
            worker = child
            // Its operations endpoint says where it listens once bound (it starts first).
            while let line = child.readLine() {
                if line.hasPrefix("http port=") { return Int(line.dropFirst("http port=".count)) }
            }
            return nil
        }
        var cpu = 0.0
        for line in worker?.stop() ?? [] where line.hasPrefix("rss ") {
            for field in line.dropFirst(4).split(separator: " ") where field.hasPrefix("cpu=") {
                cpu = Double(field.dropFirst(4)) ?? 0
            }
        }
        _ = peersChild.stop()
        for step in steps {
            print(
                String(
                    format:
                        "round %d offered %6.0f/s (sent %6.0f/s): %6d of %6d results, p50 %6.1f ms, p99 %6.1f ms, p99.9 %6.1f ms, max %6.1f ms",
                    round + 1, step.rate, step.sentRate, step.results, step.sent, step.percentile(0.5),
                    step.percentile(0.99), step.percentile(0.999), step.latencies.max() ?? .nan)
                    + String(
                        format: "; p50/p99 in %.1f/%.1f, work %.1f/%.1f, out %.1f/%.1f ms",
                        step.percentile(0.5, of: \.inbound), step.percentile(0.99, of: \.inbound),
                        step.percentile(0.5, of: \.work), step.percentile(0.99, of: \.work),
                        step.percentile(0.5, of: \.outbound), step.percentile(0.99, of: \.outbound))
                    + String(format: "; cores %.0f%% busy", step.machineBusy * 100))
            let share = step.workerShare
            if let share {
                print(
                    String(
                        format:
                            "        worker's share (histogram, %.0f events): p50 %.1f ms, p99 %.1f ms, mean %.2f ms, %.1f%% within 25 ms",
                        share.count, share.quantileMilliseconds(0.5), share.quantileMilliseconds(0.99),
                        share.meanMilliseconds, share.shareWithin(milliseconds: 25) * 100))
            }
            printJSON([
                "scenario": "latency", "round": round, "offeredRate": step.rate, "sentRate": step.sentRate,
                "sent": step.sent, "results": step.results, "delivered": step.delivered,
                "p50Ms": step.percentile(0.5), "p99Ms": step.percentile(0.99), "p999Ms": step.percentile(0.999),
                "maxMs": step.latencies.max() ?? -1, "stepSeconds": stepSeconds, "workerCPUSeconds": cpu,
                "machineBusy": step.machineBusy, "inP50Ms": step.percentile(0.5, of: \.inbound),
                "inP99Ms": step.percentile(0.99, of: \.inbound),
                "workP50Ms": step.percentile(0.5, of: \.work), "workP99Ms": step.percentile(0.99, of: \.work),
                "outP50Ms": step.percentile(0.5, of: \.outbound), "outP99Ms": step.percentile(0.99, of: \.outbound),
                // -1: no figure (no scrape, or no event recorded); JSON has no NaN.
                "shareCount": share?.count ?? -1, "shareP50Ms": jsonFigure(share?.quantileMilliseconds(0.5)),
                "shareP99Ms": jsonFigure(share?.quantileMilliseconds(0.99)),
                "shareMeanMs": jsonFigure(share?.meanMilliseconds),
                "shareBuckets": share?.bucketCounts ?? [:],
            ])
        }
    }
}

/// A figure for a `json` line: -1 for none or NaN.
func jsonFigure(_ value: Double?) -> Double {
    guard let value, value.isFinite else { return -1 }
    return value
}
