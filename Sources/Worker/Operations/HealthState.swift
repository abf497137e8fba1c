import Threading
import Foundation

/// Liveness and readiness as the pipeline reports them, read by `/health/live` and `/health/ready`.
///
/// Thread-safe: the pipeline's tasks call the `mark…` methods and `heartbeat()` from anywhere; the
/// HTTP server reads from its event loop. Readiness red never stops the worker; it pages a human.
package final class HealthState: Sendable {
    /// What `/health/ready` reports: each check is `"ok"` or why not.
    package struct Readiness: Sendable, Hashable {
        package var kafka: String
        /// Each credential APNs refuses, with why and since when, or "ok": said, but the worker stays
        /// ready while any credential can push (`everyCredentialBroken`).
        package var credentials: String
        /// Every configured credential is refused: the worker can push nothing.
        package var everyCredentialBroken = false
        /// Key or certificate files that changed and do not load (the credential loaded before them
        /// stays in use): said, but the worker stays ready, for it sends as before.
        package var credentialFiles: String = "ok"
        package var isReady: Bool { kafka == "ok" && !everyCredentialBroken }
    }

    /// Liveness fails when no heartbeat came for this long.
    package let livenessWindow: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private let wallClock: @Sendable () -> Date
    private let state: Locked<StateMachine>

    /// - Parameters:
    ///   - livenessWindow: 60 s by default (`WorkerRuntime` passes twice `delivery.retry.maxBackoff`
    ///     when that is longer; docs/worker.md); the pipeline loop calls `heartbeat()` on progress and
    ///     while idle-waiting, well within it.
    ///   - now, wallClock: injectable for tests (the wall clock only stamps "since" in readiness).
    package init(
        livenessWindow: Duration = .seconds(60),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        wallClock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.livenessWindow = livenessWindow
        self.now = now
        self.wallClock = wallClock
        // Alive from the start: startup counts as progress.
        self.state = Locked(StateMachine(now: now()))
    }

    /// The pipeline made progress, or is idle-waiting for input.
    package func heartbeat() {
        let instant = now()
        state.withLock { $0.heartbeat(now: instant) }
    }

    /// The consumer was assigned partitions by its group.
    package func markConsumerJoined() {
        state.withLock { $0.consumerJoined() }
    }

    /// The consumer left its group (shutdown, or lost the group).
    package func markConsumerLeft() {
        state.withLock { $0.consumerLeft() }
    }

    /// librdkafka reported an error it retries itself, reaching Kafka (a broker refused, a TLS
    /// handshake or SASL authentication failed): readiness says it while the consumer is outside its
    /// group. `summary`: an error that only sums up others ("1/1 brokers are down").
    package func markKafkaFailed(_ reason: String, summary: Bool) {
        state.withLock { $0.kafkaFailed(reason, summary: summary) }
    }

    /// librdkafka reported a fatal producer error: results cannot be published any more.
    package func markProducerFatal(_ reason: String) {
        state.withLock { $0.producerFailed(reason) }
    }

    /// Kafka does not take results (`reason`: what it answered, or how long none was accepted).
    package func markResultsWaiting(_ reason: String) {
        state.withLock { $0.resultsWaiting(reason) }
    }

    /// Results can be published again after a producer failure.
    package func markProducerHealthy() {
        state.withLock { $0.producerRecovered() }
    }

    /// APNs refused this credential (InvalidProviderToken, BadCertificate, …). The first reason and
    /// time are kept until it is healthy again, so "since" tells how long it has been broken.
    package func markCredentialBroken(name: String, reason: String) {
        let since = Self.timestamp(wallClock())
        state.withLock { $0.credentialBroken(name, reason: reason, since: since) }
    }

    /// The credentials the worker is configured with: readiness is red only when every one of them
    /// is broken (before this is said, when any is).
    package func configure(credentials: [String]) {
        state.withLock { $0.configured(credentials: credentials) }
    }

    /// A request with this credential succeeded again, or its files were reloaded (a new key or
    /// certificate is given its chance at once; APNs' next answer judges it).
    package func markCredentialHealthy(name: String) {
        state.withLock { $0.credentialHealthy(name) }
    }

    /// A credential's files changed and do not load (`problem`: why, and what stays in use), or
    /// (`nil`) they load again or are back to what is in use.
    package func markCredentialFiles(name: String, problem: String?) {
        let since = Self.timestamp(wallClock())
        state.withLock { $0.credentialFiles(name, problem: problem, since: since) }
    }

    package var isLive: Bool {
        let instant = now()
        return state.withLock { $0.isLive(now: instant, window: livenessWindow) }
    }

    package var readiness: Readiness {
        state.withLock { $0.readiness }
    }

    private static func timestamp(_ date: Date) -> String {
        ISO8601DateFormatter().string(from: date)
    }
}
