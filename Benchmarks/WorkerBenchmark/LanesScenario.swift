import Foundation

/// `WORKER_BENCH_SCENARIO=lanes`: what `consumer.lanes.urgent` does for urgent events behind a bulk
/// backlog, as users meet it. Two input topics, `bulk` (8 partitions, `WORKER_BENCH_BULK_PARTITIONS`)
/// and `urgent` (2, `WORKER_BENCH_URGENT_PARTITIONS`); a backlog of `WORKER_BENCH_BACKLOG` events
/// (200,000) on `bulk` before the worker starts; while it drains, urgent events at
/// `WORKER_BENCH_URGENT_RATE` per second (20), open loop (`Lanes.run`). The simulator answers after
/// 20 to 60 ms (`WORKER_BENCH_APNS_LATENCY_MS`, `20..60`); the worker's consumer fetches with
/// `fetch.wait.max.ms` 10 (`WORKER_BENCH_FETCH_WAIT_MS`, `default` for librdkafka's own), as
/// docs/configuration.md advises on brokers that hold an empty fetch (both here do).
///
/// Each round runs the worker once per variant (`WORKER_BENCH_LANES_VARIANTS`: no-urgent,
/// without-lanes, with-lanes), each on fresh peers with the same backlog, in the reverse order every
/// other round, so that with and without lanes alternate and each ratio comes from one sitting.
@MainActor func runLanesScenario() async throws {
    let backlog = Int(environment["WORKER_BENCH_BACKLOG"] ?? "") ?? 200_000
    let urgentRate = Double(environment["WORKER_BENCH_URGENT_RATE"] ?? "") ?? 20
    let bulkPartitions = Int(environment["WORKER_BENCH_BULK_PARTITIONS"] ?? "") ?? 8
    let urgentPartitions = Int(environment["WORKER_BENCH_URGENT_PARTITIONS"] ?? "") ?? 2
    let apnsLatency = environment["WORKER_BENCH_APNS_LATENCY_MS"] ?? "20..60"
    let fetchWait = environment["WORKER_BENCH_FETCH_WAIT_MS"] ?? "10"
    // The worker's own in-flight bounds unless WORKER_BENCH_MAX_IN_FLIGHT says otherwise: as users meet it.
    let inFlightBound = environment["WORKER_BENCH_MAX_IN_FLIGHT"] == nil ? 0 : maxInFlight
    let consumerProperties =
        ((fetchWait == "default" ? [] : [#"fetch.wait.max.ms: "\#(fetchWait)""#])
        + [environment["WORKER_BENCH_CONSUMER_PROPERTIES"]].compactMap { $0 }).joined(separator: ", ")
    let variants =
        (environment["WORKER_BENCH_LANES_VARIANTS"] ?? "").split(separator: ",").compactMap {
            Lanes.Variant(rawValue: String($0))
        }.nilIfEmpty ?? Lanes.Variant.allCases
    print(
        "Lanes on \(Peers.broker): a backlog of \(backlog) events on \(Lanes.bulkTopic) (\(bulkPartitions) partitions), "
            + "urgent events on \(Lanes.urgentTopic) (\(urgentPartitions) partitions) at \(Int(urgentRate))/s while it "
            + "drains; APNs answering after \(apnsLatency) ms; worker consumer { \(consumerProperties) }, APNs connections "
            + (connections > 0 ? "\(connections)" : "default") + ", maxInFlight "
            + (inFlightBound > 0 ? "\(inFlightBound)" : "default")
            + "; \(rounds) round(s) of \(variants.map(\.rawValue))")

    var runs: [Lanes.Variant: [Lanes.Run]] = [:]
    for round in 0..<rounds {
        for variant in round % 2 == 0 ? variants : variants.reversed() {
            // What else the machine is doing: its cores' busy share over a second before the run.
            let idleBefore = OpenLoop.machineTicks()
            try await Task.sleep(for: .seconds(1))
            let idleAfter = OpenLoop.machineTicks()
            let backgroundBusy =
                Double(idleAfter.busy - idleBefore.busy) / Double(max(idleAfter.total - idleBefore.total, 1))

            let topic = "bench-results-\(variant.rawValue)-\(round)"
            let peersChild = try Child(
                [
                    "--peers", topic, "\(Lanes.bulkTopic):\(bulkPartitions)",
                    "\(Lanes.urgentTopic):\(urgentPartitions)",
                ], environment: ["WORKER_BENCH_APNS_LATENCY_MS": apnsLatency])
            var peers = Peers.Addresses()
            while let line = peersChild.readLine(), !peers.read(line) {}
            guard peers.simulatorPort > 0 else { throw BenchmarkFailure("the peers did not start") }
            _ = try await Backlog.produce(backlog, topic: Lanes.bulkTopic, bootstrap: peers.bootstrap, logger: logger)
            let workerArguments = [
                "--worker", Mode.worker.rawValue, "bench-lanes-\(variant.rawValue)-\(round)", topic, "\(inFlightBound)",
                peers.bootstrap, "\(peers.simulatorPort)", peers.caFile, peers.keyFile,
                "\(Lanes.bulkTopic),\(Lanes.urgentTopic)", variant.lanes ? Lanes.urgentTopic : "",
            ]
            let workerEnvironment =
                consumerProperties.isEmpty ? [:] : ["WORKER_BENCH_CONSUMER_PROPERTIES": consumerProperties]
            let peersCPUBefore = cpuSeconds(of: peersChild.process.processIdentifier)
            var worker: Child?
            var run = try await Lanes.run(
                backlog: backlog, rate: variant.urgentTraffic ? urgentRate : 0, bootstrap: peers.bootstrap,
                resultsTopic: topic, timeout: runTimeout, logger: logger
            ) {
                worker = try Child(workerArguments, wrapper: workerWrapper, environment: workerEnvironment)
            }
            run.peersCPUSeconds = cpuSeconds(of: peersChild.process.processIdentifier) - peersCPUBefore
            for line in worker?.stop() ?? [] where line.hasPrefix("rss ") {
                for field in line.dropFirst(4).split(separator: " ") {
                    let parts = field.split(separator: "=")
                    switch parts.first {
                    case "cpu": run.workerCPUSeconds = Double(parts[1]) ?? 0
                    case "peak": run.workerPeakRSSKiB = Int(parts[1]) ?? 0
                    default: break
                    }
                }
            }
            _ = peersChild.stop()
            runs[variant, default: []].append(run)

            func ms(_ value: Double?) -> String { value.map { String(format: "%.1f", $0) } ?? "-" }
            var line =
                "round \(round + 1) \(variant.label.leftAligned(18))"
                + String(
                    format: "bulk %7d results in %6.2f s (%6.0f/s)", run.bulkResults, run.drainSeconds, run.bulkRate)
            if variant.urgentTraffic {
                line +=
                    "; urgent \(run.urgentResults) of \(run.urgentSent): p50 \(ms(run.percentile(0.5))), "
                    + "p99 \(ms(run.percentile(0.99))), max \(ms(run.percentile(1))) ms; p50/p99 in "
                    + "\(ms(run.percentile(0.5, of: \.inbound)))/\(ms(run.percentile(0.99, of: \.inbound))), work "
                    + "\(ms(run.percentile(0.5, of: \.work)))/\(ms(run.percentile(0.99, of: \.work))), out "
                    + "\(ms(run.percentile(0.5, of: \.outbound)))/\(ms(run.percentile(0.99, of: \.outbound))) ms"
                    + " (of in, to the broker's ack p50/p99/max \(ms(run.percentile(0.5, of: \.acknowledged)))/"
                    + "\(ms(run.percentile(0.99, of: \.acknowledged)))/\(ms(run.percentile(1, of: \.acknowledged))) ms)"
            }
            line +=
                "; bulk work p50/p99 \(ms(run.percentile(0.5, of: \.bulkWork)))/"
                + "\(ms(run.percentile(0.99, of: \.bulkWork))) ms"
            print(
                line
                    + String(
                        format: "; worker CPU %.1f s; cores %.0f%% busy (%.0f%% before the run)", run.workerCPUSeconds,
                        run.machineBusy * 100, backgroundBusy * 100))

            var fields: [String: any Sendable] = [
                "scenario": "lanes", "variant": variant.rawValue, "lanes": variant.lanes, "round": round,
                "maxInFlight": inFlightBound, "backlog": backlog, "bulkPartitions": bulkPartitions,
                "urgentPartitions": urgentPartitions,
                "urgentRate": variant.urgentTraffic ? urgentRate : 0, "apnsLatencyMs": apnsLatency,
                "consumerProperties": consumerProperties, "bulkResults": run.bulkResults,
                "bulkDrainSeconds": run.drainSeconds, "bulkRate": run.bulkRate, "urgentSent": run.urgentSent,
                "urgentCount": run.urgentResults, "machineBusy": run.machineBusy, "backgroundBusy": backgroundBusy,
                "workerCPUSeconds": run.workerCPUSeconds, "workerPeakRSSKiB": run.workerPeakRSSKiB,
                "peersCPUSeconds": run.peersCPUSeconds,
                "urgentLatenciesMs": run.latenciesBySchedule.map { ($0 * 10).rounded() / 10 },
            ]
            for (key, p, values) in [
                ("urgentP50Ms", 0.5, \Lanes.Run.latencies), ("urgentP99Ms", 0.99, \.latencies),
                ("urgentMaxMs", 1, \.latencies), ("inP50Ms", 0.5, \.inbound), ("inP99Ms", 0.99, \.inbound),
                ("workP50Ms", 0.5, \.work), ("workP99Ms", 0.99, \.work), ("outP50Ms", 0.5, \.outbound),
                ("outP99Ms", 0.99, \.outbound), ("ackedP50Ms", 0.5, \.acknowledged),
                ("ackedP99Ms", 0.99, \.acknowledged), ("ackedMaxMs", 1, \.acknowledged),
                ("bulkWorkP50Ms", 0.5, \.bulkWork), ("bulkWorkP99Ms", 0.99, \.bulkWork),
            ] {
                if let value = run.percentile(p, of: values) { fields[key] = value }
            }
            printJSON(fields)
        }
    }

    // The medians over the rounds, and what lanes change, as ratios within this run.
    func median(_ variant: Lanes.Variant, _ value: (Lanes.Run) -> Double?) -> Double? {
        let values = (runs[variant] ?? []).compactMap(value).sorted()
        guard !values.isEmpty else { return nil }
        return (values[(values.count - 1) / 2] + values[values.count / 2]) / 2
    }
    print(
        "\n" + "median of \(rounds) round(s)".leftAligned(22) + "urgent p50 / p99 / max".leftAligned(30) + "bulk drain")
    for variant in variants {
        let urgent = [0.5, 0.99, 1].map { p in median(variant) { $0.percentile(p) } }
        let urgentText =
            variant.urgentTraffic
            ? urgent.map { $0.map { String(format: "%.1f", $0) } ?? "-" }.joined(separator: " / ") + " ms" : "-"
        let drain = median(variant) { $0.drainSeconds } ?? 0
        let rate = median(variant) { $0.bulkRate } ?? 0
        print(
            variant.label.leftAligned(22) + urgentText.leftAligned(30)
                + String(format: "%.2f s, %.0f events/s", drain, rate))
    }
    if let withP99 = median(.with, { $0.percentile(0.99) }), let withoutP99 = median(.without, { $0.percentile(0.99) }),
        let withP50 = median(.with, { $0.percentile(0.5) }), let withoutP50 = median(.without, { $0.percentile(0.5) })
    {
        print(
            String(
                format: "urgent latency with lanes / without: p50 %.3fx, p99 %.3fx", withP50 / withoutP50,
                withP99 / withoutP99))
    }
    if let reference = median(.reference, { $0.bulkRate }), reference > 0 {
        for variant in [Lanes.Variant.without, .with] {
            if let rate = median(variant, { $0.bulkRate }) {
                print(
                    "bulk rate \(variant.label) / without urgent traffic: "
                        + String(format: "%.0f%%", rate / reference * 100))
            }
        }
    }
}
