import Threading
import APNs
import CoreMetrics
import Foundation
import Kafka
import Prometheus

/// Every metric of the table in docs/deployment.md, with its exact name and labels, so the
/// pipeline calls `metrics.completed(outcome: "delivered")` instead of spelling names.
///
/// Built on swift-metrics with an explicit factory: tests give each instance its own Prometheus
/// registry instead of going through the global, bootstrap-once `MetricsSystem`.
package final class WorkerMetrics: Sendable {
    /// Label values known up front; their series exist (at 0) from the start, so dashboards and
    /// alerts see them before the first event.
    package static let outcomes = ["delivered", "unregistered", "rejected", "failed", "expired", "invalid"]
    package static let deadLetterReasons = DeadLetterReason.allCases.map(\.rawValue)
    package static let retryCauses = [
        "too-many-requests", "server-error", "unavailable", "transport", "timeout", "provider-token",
    ]

    /// Every metric the worker exports, with its `# HELP` text (swift-metrics carries no help text,
    /// so `/metrics` adds these lines itself; see `withHelpLines`).
    package static let help: [String: String] = [
        "apns_worker_build_info": "Always 1; the version label is this build's release.",
        "apns_worker_trace_context_ignored_total":
            "Consumed records whose W3C trace context was not carried into their result, by reason.",
        "apns_worker_events_consumed_total": "Records read from an input topic.",
        "apns_worker_events_completed_total":
            "Events whose result Kafka acknowledged, by outcome.",
        "apns_worker_credential_outcomes_total":
            "Events sent to APNs whose result Kafka acknowledged, by the credential they used and outcome.",
        "apns_worker_dead_letters_total": "Dead letters Kafka acknowledged, by dlq-reason.",
        "apns_worker_apns_requests_total":
            "APNs answers by HTTP status (none: no answer) and reason, credential and lane.",
        "apns_worker_apns_request_duration_seconds":
            "From sending an APNs request to its answer, by credential and lane.",
        "apns_worker_event_duration_seconds":
            "From consuming an event to its result acknowledged, by credential (none: never sent) and lane.",
        "apns_worker_retries_total": "Retries scheduled, by cause.",
        "apns_worker_published_degraded_total":
            "Results and dead letters Kafka refused as they were and took degraded, by topic and Kafka error.",
        "apns_worker_in_flight_events": "Events consumed and not yet completed.",
        "apns_worker_parked_events":
            "Events parked over their credential's share of the in-flight bound (read, not yet sent; not in apns_worker_in_flight_events).",
        "apns_worker_consumer_paused":
            "1 while the pipeline holds its input (the in-flight bound is reached, or an output topic refuses every record); not librdkafka's partition pauses.",
        "apns_worker_consumer_lag": "Records behind the end of each input partition (librdkafka statistics).",
        "apns_worker_partition_stalled":
            "1 while an input partition is stalled: fetching, unpaused, its position unmoved for the stall bound while the broker holds records beyond it; 0 once it reads again.",
        "apns_worker_partition_stall_seeks_total":
            "Seeks of a stalled input partition to its own position (to restart its fetch), once per stall bound while it lasts.",
        "apns_worker_commits_total": "Offset commits, by result.",
        "apns_worker_events_already_done_total":
            "Records read again that an earlier owner had finished (its commit said so): not pushed again.",
        "apns_worker_commit_metadata_omitted_total":
            "Done offsets a commit had no room to record (the highest): a crash before the next commit pushes them again.",
        "apns_worker_results_waiting_seconds":
            "How long Kafka has acknowledged no result while some wait (0 while results are accepted).",
        "apns_worker_progress_store":
            "1 for where done records above committed offsets are kept (commit-metadata, progress-topic, or unknown until the start's probe is answered).",
        "apns_worker_done_records_refused_total":
            "Done records read back at an assignment that cannot be true (past-end: beyond the partition's end; too-many-gaps: more left not done inside them than a writer could have had unfinished): ignored, their events run again.",
        "apns_worker_revocation_commits_given_up_total":
            "Revocations that let their partitions go without their commit: their next owner pushes again what finished since the last one.",
        "apns_worker_credentials_broken": "1 while APNs refuses the credential, 0 once it works.",
        "apns_worker_credential_expiry_timestamp_seconds":
            "When each certificate credential's certificate expires (its notAfter, Unix seconds); token keys do not expire.",
        "apns_worker_apns_connections": "APNs connections per pool, by state.",
        "apns_worker_apns_streams_in_use": "HTTP/2 streams in use per APNs pool.",
        "apns_worker_apns_stream_capacity": "HTTP/2 streams the pool's connections allow at once.",
        "apns_worker_apns_requests_waiting": "Requests waiting for a free stream per APNs pool.",
        "apns_worker_apns_provider_tokens_signed_total": "Provider tokens signed per key (one a period).",
        "apns_worker_apns_provider_token_switches_total": "Connections moved to a newer token, per key.",
        "apns_worker_apns_provider_token_signing_failures_total":
            "Provider tokens that could not be signed (or whose signature did not verify), per key: no token was sent.",
        "apns_worker_apns_connections_retired_total":
            "Connections retired: APNs refused their token, or their credential was reloaded.",
        "apns_worker_wall_clock_jumps_total":
            "Wall-clock jumps of 30 s or more against the monotonic clock, seen by the provider-token signer.",
        "apns_worker_credential_reloads_total": "Credential files read again after they changed, by result.",
        "apns_worker_credential_reload_failing":
            "1 while a credential's files changed and do not load (the one before stays in use).",
    ]

    /// The Prometheus text with a `# HELP` line before each known metric's `# TYPE` line.
    package static func withHelpLines(_ text: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.count + help.count * 80)
        let typePrefix = Array("# TYPE ".utf8)
        for line in text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if line.starts(with: typePrefix) {
                let name = String(
                    decoding: line.dropFirst(typePrefix.count).prefix { $0 != UInt8(ascii: " ") }, as: UTF8.self)
                if let text = help[name] { out.append(contentsOf: "# HELP \(name) \(text)\n".utf8) }
            }
            out.append(contentsOf: line)
            out.append(UInt8(ascii: "\n"))
        }
        if text.last != UInt8(ascii: "\n"), !out.isEmpty { out.removeLast() }
        return out
    }

    /// Buckets for both duration histograms: 1 ms to 60 s (an event may wait out several backoffs).
    package static let durationBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
        .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    let factory: any MetricsFactory
    private let counters = Locked<[SeriesKey: CoreMetrics.Counter]>([:])
    private let gauges = Locked<[SeriesKey: CoreMetrics.Gauge]>([:])
    /// Counters moved to totals read at scrape time: the total each was last moved to.
    let scrapedTotals = Locked<[SeriesKey: Int]>([:])
    /// `apns_worker_apns_request_duration_seconds` and `apns_worker_event_duration_seconds` by
    /// credential and lane.
    let apnsRequestDurations = SeriesMap<Route, CoreMetrics.Timer>()
    let eventDurations = SeriesMap<Route, CoreMetrics.Timer>()
    private let inFlight: CoreMetrics.Gauge
    private let parked: CoreMetrics.Gauge
    private let inputHeld: CoreMetrics.Gauge

    struct SeriesKey: Hashable {
        var name: String
        var labels: [String]
    }

    /// The series every event touches, found without building a label array each time.
    /// Six outcomes, searched in order: `==` on short strings compares them inline, without hashing.
    private let completedByOutcome: [(outcome: String, counter: CoreMetrics.Counter)]
    private let deadLettersByReason: [String: CoreMetrics.Counter]
    private let retriesByCause: [String: CoreMetrics.Counter]
    private let consumedByTopic = SeriesMap<String, CoreMetrics.Counter>()
    /// Each answer's counter with its route's latency histogram: one lookup per answer.
    let apnsRequests = SeriesMap<APNsSeries, (count: CoreMetrics.Counter, duration: CoreMetrics.Timer)>()
    private let credentialGauges = SeriesMap<String, CoreMetrics.Gauge>()
    /// `apns_worker_credential_outcomes_total` by credential and outcome: found per event without
    /// building a label array.
    private let credentialOutcomes = SeriesMap<CredentialOutcome, CoreMetrics.Counter>()

    struct APNsSeries: Hashable, Sendable {
        var status: String
        var reason: String
        var route: Route
    }

    /// The statuses of Apple's provider API (device pushes, broadcasts, channel management).
    static let apnsStatuses: Set<Int> = [200, 201, 204, 400, 403, 404, 405, 410, 413, 429, 500, 503]

    private struct CredentialOutcome: Hashable, Sendable {
        var credential: String
        var outcome: String
    }

    /// Metrics into `registry` (served at `/metrics`).
    package convenience init(registry: PrometheusCollectorRegistry) {
        self.init(factory: Self.prometheusFactory(registry: registry))
    }

    /// Metrics into any swift-metrics backend.
    package init(factory: any MetricsFactory) {
        self.factory = factory
        inFlight = CoreMetrics.Gauge(label: "apns_worker_in_flight_events", factory: factory)
        parked = CoreMetrics.Gauge(label: "apns_worker_parked_events", factory: factory)
        parked.record(0)
        inputHeld = CoreMetrics.Gauge(label: "apns_worker_consumer_paused", factory: factory)
        inFlight.record(0)
        inputHeld.record(0)
        var completed: [(outcome: String, counter: CoreMetrics.Counter)] = []
        var deadLetters: [String: CoreMetrics.Counter] = [:]
        var retries: [String: CoreMetrics.Counter] = [:]
        for outcome in Self.outcomes {
            completed.append(
                (
                    outcome,
                    CoreMetrics.Counter(
                        label: "apns_worker_events_completed_total", dimensions: [("outcome", outcome)],
                        factory: factory)
                ))
        }
        for reason in Self.deadLetterReasons {
            deadLetters[reason] = CoreMetrics.Counter(
                label: "apns_worker_dead_letters_total", dimensions: [("reason", reason)], factory: factory)
        }
        for cause in Self.retryCauses {
            retries[cause] = CoreMetrics.Counter(
                label: "apns_worker_retries_total", dimensions: [("cause", cause)], factory: factory)
        }
        completedByOutcome = completed
        deadLettersByReason = deadLetters
        retriesByCause = retries
        for result in ["ok", "error"] { _ = counter("apns_worker_commits_total", [("result", result)]) }
        for refusal in DoneRecordBounds.Refusal.allCases {
            _ = counter("apns_worker_done_records_refused_total", [("reason", refusal.rawValue)])
        }
        for reason in TraceContext.Ignored.allCases {
            _ = counter("apns_worker_trace_context_ignored_total", [("reason", reason.rawValue)])
        }
        for name in [
            "apns_worker_events_already_done_total", "apns_worker_commit_metadata_omitted_total",
            "apns_worker_revocation_commits_given_up_total",
        ] { _ = counter(name, []) }
        setProgressStore(ProgressStore.unknown.rawValue)
        setResultsWaiting(.zero)
        gauge("apns_worker_build_info", [("version", WorkerVersion.current)]).record(1)
    }

    /// A Prometheus factory for `registry` with this worker's histogram buckets.
    package static func prometheusFactory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = [
            "apns_worker_apns_request_duration_seconds": durationBuckets,
            "apns_worker_event_duration_seconds": durationBuckets,
        ]
        return factory
    }

    // MARK: Counters

    /// A record read from an input topic.
    package func consumed(topic: String) {
        consumedByTopic.value(for: topic) { counter("apns_worker_events_consumed_total", [("topic", topic)]) }
            .increment()
    }

    /// A result event acknowledged by Kafka; `outcome` is one of `outcomes`. `credential`: the
    /// configured credential it was sent with, if any (`apns_worker_credential_outcomes_total`).
    package func completed(outcome: String, credential: String? = nil) {
        (completedByOutcome.first { $0.outcome == outcome }?.counter
            ?? counter("apns_worker_events_completed_total", [("outcome", outcome)]))
            .increment()
        if let credential { credentialOutcome(credential, outcome).increment() }
    }

    /// The outcomes an event sent with a credential can have (never `invalid`).
    package static let sentOutcomes = ["delivered", "unregistered", "rejected", "failed", "expired"]

    /// Makes `credential`'s series exist at 0 (its broken gauge and its outcomes), so that dashboards
    /// and alerts see them before the first event.
    /// The topics results and dead letters are published to: `published_degraded_total` exists at
    /// 0 for each, by every refusal it handles, from the start.
    package func register(publishTopics topics: [String]) {
        for topic in topics {
            for code in KafkaError.recordRefusals {
                _ = counter("apns_worker_published_degraded_total", [("topic", topic), ("reason", code.name)])
            }
        }
    }

    /// The input topics: `partition_stall_seeks_total` exists at 0 for each from the start.
    package func register(inputTopics topics: [String]) {
        for topic in topics { _ = counter("apns_worker_partition_stall_seeks_total", [("topic", topic)]) }
    }

    package func register(credential: String) {
        setCredentialBroken(credential, false)
        for outcome in Self.sentOutcomes { _ = credentialOutcome(credential, outcome) }
    }

    private func credentialOutcome(_ credential: String, _ outcome: String) -> CoreMetrics.Counter {
        credentialOutcomes.value(for: CredentialOutcome(credential: credential, outcome: outcome)) {
            counter("apns_worker_credential_outcomes_total", [("credential", credential), ("outcome", outcome)])
        }
    }

    /// A dead letter acknowledged by Kafka; `reason` is one of `deadLetterReasons`.
    package func deadLettered(reason: String) {
        (deadLettersByReason[reason] ?? counter("apns_worker_dead_letters_total", [("reason", reason)])).increment()
    }

    /// A retry scheduled; `cause` is one of `retryCauses`.
    package func retryScheduled(cause: String) {
        (retriesByCause[cause] ?? counter("apns_worker_retries_total", [("cause", cause)])).increment()
    }

    /// An offset commit finished.
    /// `apns_worker_published_degraded_total{topic,reason}`: results and dead letters Kafka refused
    /// as they were and took in their degraded form (`reason`: Kafka's error name).
    package func publishedDegraded(topic: String, reason: String) {
        counter("apns_worker_published_degraded_total", [("topic", topic), ("reason", reason)]).increment()
    }

    package func committed(success: Bool) {
        counter("apns_worker_commits_total", [("result", success ? "ok" : "error")]).increment()
    }

    /// A record an earlier owner had finished was read again and not run.
    package func alreadyDone() {
        counter("apns_worker_events_already_done_total", []).increment()
    }

    /// Done records read back were refused; `reason` is a `DoneRecordBounds.Refusal`.
    package func doneRecordsRefused(reason: String) {
        counter("apns_worker_done_records_refused_total", [("reason", reason)]).increment()
    }

    /// A commit's metadata left out this many done offsets.
    package func commitMetadataOmitted(_ offsets: Int) {
        counter("apns_worker_commit_metadata_omitted_total", []).increment(by: Int64(offsets))
    }

    /// How long Kafka has acknowledged no result while some wait.
    package func setResultsWaiting(_ duration: Duration) {
        gauge("apns_worker_results_waiting_seconds", []).record(Double(duration.components.seconds))
    }

    /// Where done records above committed offsets are kept: 1 for `store`, 0 for the others.
    package func setProgressStore(_ store: String) {
        for known in ProgressStore.allCases.map(\.rawValue) {
            gauge("apns_worker_progress_store", [("store", known)]).record(known == store ? 1 : 0)
        }
    }

    /// A revocation let its partitions go without its commit.
    package func revocationCommitGaveUp() {
        counter("apns_worker_revocation_commits_given_up_total", []).increment()
    }

    // MARK: Histograms and gauges

    package func setInFlight(_ count: Int) {
        inFlight.record(count)
    }

    /// `apns_worker_parked_events`.
    package func setParked(_ count: Int) {
        parked.record(count)
    }

    /// `apns_worker_consumer_paused`: the name is kept (a contract); what it reports is the hold.
    package func setInputHeld(_ held: Bool) {
        inputHeld.record(held ? 1 : 0)
    }

    /// From librdkafka statistics.
    package func setConsumerLag(topic: String, partition: Int32, lag: Int64) {
        gauge("apns_worker_consumer_lag", [("topic", topic), ("partition", String(partition))]).record(lag)
    }

    /// A stalled input partition (sought again) or one that reads again.
    package func partitionStall(_ event: KafkaPartitionStall) {
        switch event {
        case .stalled(let partition, _, _, _):
            gauge(
                "apns_worker_partition_stalled",
                [("topic", partition.topic), ("partition", String(partition.partition))]
            )
            .record(1)
            counter("apns_worker_partition_stall_seeks_total", [("topic", partition.topic)]).increment()
        case .recovered(let partition):
            gauge(
                "apns_worker_partition_stalled",
                [("topic", partition.topic), ("partition", String(partition.partition))]
            )
            .record(0)
        }
    }

    /// 1 while APNs refuses the credential, 0 once it works again.
    package func setCredentialBroken(_ name: String, _ isBroken: Bool) {
        // Called for every delivered notification: the gauge is found by name alone.
        credentialGauges.value(for: name) { gauge("apns_worker_credentials_broken", [("credential", name)]) }
            .record(isBroken ? 1 : 0)
    }

    /// When a certificate credential's certificate expires (set once, at start).
    package func setCredentialExpiry(_ name: String, _ date: Date) {
        gauge("apns_worker_credential_expiry_timestamp_seconds", [("credential", name)])
            .record(date.timeIntervalSince1970)
    }

    // MARK: Series cache

    /// One `Counter` per label set, made once: creating one per increment would cost a registry
    /// lookup under its lock on the hot path.
    func counter(_ name: String, _ labels: [(String, String)]) -> CoreMetrics.Counter {
        let key = SeriesKey(name: name, labels: labels.flatMap { [$0.0, $0.1] })
        return counters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = CoreMetrics.Counter(label: name, dimensions: labels, factory: factory)
            cache[key] = counter
            return counter
        }
    }

    /// Takes a counter's series out of the registry (and forgets its scraped total): it is made
    /// again at 0 if it is counted again.
    func removeCounter(_ name: String, _ labels: [(String, String)]) {
        let key = SeriesKey(name: name, labels: labels.flatMap { [$0.0, $0.1] })
        let removed = counters.withLock { $0.removeValue(forKey: key) }
        scrapedTotals.withLock { $0[key] = nil }
        removed?.destroy()
    }

    func gauge(_ name: String, _ labels: [(String, String)]) -> CoreMetrics.Gauge {
        let key = SeriesKey(name: name, labels: labels.flatMap { [$0.0, $0.1] })
        return gauges.withLock { cache in
            if let gauge = cache[key] { return gauge }
            let gauge = CoreMetrics.Gauge(label: name, dimensions: labels, factory: factory)
            cache[key] = gauge
            return gauge
        }
    }
}

/// Series found by a label value on the path every event takes. Nearly every event has the same
/// value as the one before (one input topic, one credential, status 200), so the last one found is
/// checked first: `==` on the same string is a comparison of its storage, where the dictionary
/// would hash it (SipHash over its bytes) every time.
final class SeriesMap<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct State {
        var all: [Key: Value] = [:]
        var last: (key: Key, value: Value)?
    }
    private let state = Locked(State())

    /// The series for `key`; `make` (run outside the lock) makes it the first time.
    func value(for key: Key, make: () -> Value) -> Value {
        let found = state.withLock { state -> Value? in
            if let last = state.last, last.key == key { return last.value }
            guard let value = state.all[key] else { return nil }
            state.last = (key, value)
            return value
        }
        if let found { return found }
        let made = make()
        return state.withLock { state in
            let value = state.all[key] ?? made
            state.all[key] = value
            state.last = (key, value)
            return value
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
