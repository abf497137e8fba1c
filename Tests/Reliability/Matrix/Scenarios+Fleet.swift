import APNsSimulator
import Foundation
import TestPeers
import WorkerDemo

extension Scenario {
    /// Seconds between two provider tokens in the fleet row, and the simulator's token windows scaled
    /// alike (Apple's: 30 minutes, 20 and 20).
    static let fleetTokenPeriod = 30.0
    static let fleetTokenWindow = 20.0

    /// Pods that share one token key, each its own `apns-worker run`, against a simulator that
    /// enforces both of APNs's token rules on a scaled clock.
    static let fleet = Scenario(
        "a fleet on one token key, token rules scaled to 30 s", .apns, brokers: [.tansu], partitions: 8,
        shows: """
            Six `apns-worker run` processes (four quick) started 4 s apart, all signing with one key, \
            push a steady 10 events/s for 150 s (five token periods; 75 s quick) while the simulator enforces APNs's two \
            token rules on a clock scaled by 1/60 (token period 30 s, windows 20 s): a connection that \
            changes its token less than a window after it first used the one it has gets 429 \
            TooManyProviderTokenUpdates and is unusable for a window, and a third distinct token of the \
            key first seen within a window is refused on any connection. Halfway one pod is replaced \
            (a rolling deploy). Every pod signs the same token each period, so no request is refused: \
            no 429 TooManyProviderTokenUpdates, no 403, at most two tokens of the key first seen \
            within a window, one new token a period. Pods that each sign their own token (as before \
            tokens were issued on a shared schedule) are refused from the third pod on.
            """
    ) { rig, scale in
        try await rig.restartSimulator(after: .zero) { configuration in
            configuration.tokenUpdateWindow = fleetTokenWindow
            configuration.tokensPerKeyWindow = fleetTokenWindow
            configuration.tokensPerKey = 2
        }
        rig.pace()
        let pods = scale.events >= Scale.full.events ? 6 : 4
        let seconds = scale.events >= Scale.full.events ? 150.0 : 75.0
        let environment = ["APNS_WORKER_APNS_TOKEN_PERIOD": "\(Int(fleetTokenPeriod))s"]
        var running: [BackgroundProgram] = []
        let started = ContinuousClock.now
        var produced = 0
        var tick = 0
        var replaced = false
        while ContinuousClock.now - started < .seconds(seconds) {
            // A pod every 4 s: pods that each signed a token of their own at start would sign them
            // with different times, so different tokens, however their signatures were made.
            if running.count < pods, ContinuousClock.now - started >= .seconds(4 * running.count) {
                running.append(try rig.startProcess(maxInFlight: 20, environment: environment))
            }
            if !replaced, ContinuousClock.now - started >= .seconds(seconds / 2) {
                // A rolling deploy's step: a new pod in and, once it pushes (its partitions
                // assigned, as readiness would gate it), the oldest out. (SIGTERMed while the new
                // pod's join was still open, Tansu 0.6 left the new pod waiting in its join, and two
                // partitions unowned, until another member left minutes later.) Events keep coming
                // meanwhile: a new pod given partitions whose events the others had all pushed has
                // nothing to push (the wait produced nothing, and the row failed once pods kept up).
                let mark = rig.simulator.observation.totalConnections
                running.append(try rig.startProcess(maxInFlight: 20, environment: environment))
                try await rig.waitUntil(90, "the new pod to push") {
                    if await rig.pushes(onConnectionsAfter: mark) > 0 { return true }
                    tick += 1
                    let batch = rig.mixedBatch(5, seed: UInt64(1000 + tick))
                    try await rig.produce(batch.records)
                    produced += batch.records.count
                    try await Task.sleep(for: .milliseconds(500))
                    return false
                }
                let old = running.removeFirst()
                old.signal(SIGTERM)
                try await rig.waitUntil(30, "the replaced pod to exit") { !old.isRunning }
                guard old.waitUntilExit() == 0 else { throw ScenarioFailure("the replaced pod did not exit 0") }
                replaced = true
            }
            tick += 1
            let batch = rig.mixedBatch(5, seed: UInt64(1000 + tick))
            try await rig.produce(batch.records)
            produced += batch.records.count
            try await Task.sleep(for: .milliseconds(500))
        }
        rig.faultCleared()
        // The group's rebalances as pods join and leave (Tansu takes seconds each) delay results;
        // the tokens are judged either way.
        let atEnd = rig.resultCount
        var waited: (any Error)?
        do { try await rig.waitForResults(produced, within: 300) } catch { waited = error }

        let observation = rig.simulator.observation
        let usage = observation.providerTokens(keyID: EmbeddedStack.keyID)
        let periods = Int(seconds / fleetTokenPeriod) + 1
        rig.logger.notice(
            "fleet tokens",
            metadata: [
                "pods": "\(pods)", "events": "\(produced)", "results when production ended": "\(atEnd)",
                "distinct tokens": "\(usage.distinctTokens)",
                "most first seen in a window": "\(usage.mostInWindow)",
                "429 TooManyProviderTokenUpdates": "\(observation.count(.tooManyProviderTokenUpdates))",
                "403": "\(observation.count(status: 403))", "connections": "\(observation.totalConnections)",
            ])
        var problems: [String] = []
        if usage.tooManyProviderTokenUpdates > 0 || observation.count(.tooManyProviderTokenUpdates) > 0 {
            problems.append(
                "\(observation.count(.tooManyProviderTokenUpdates)) requests refused 429 TooManyProviderTokenUpdates "
                    + "(\(usage.tooEarlyUpdates) changes too soon on a connection, \(usage.unusableConnectionRefusals) "
                    + "on a connection unusable after one, \(usage.keyLimitRefusals) over the key's tokens in a window)"
            )
        }
        if observation.count(status: 403) > 0 { problems.append("\(observation.count(status: 403)) answered 403") }
        if usage.mostInWindow > 2 { problems.append("\(usage.mostInWindow) tokens first seen within one window") }
        if usage.distinctTokens > periods + 1 || usage.distinctTokens < periods - 1 {
            problems.append("\(usage.distinctTokens) distinct tokens in \(periods) periods")
        }
        if let waited { problems.append("\(waited)") }
        if !problems.isEmpty { throw ScenarioFailure(problems.joined(separator: "; ")) }
    }
}
