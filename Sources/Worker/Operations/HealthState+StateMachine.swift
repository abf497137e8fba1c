extension HealthState {
    /// What liveness and readiness are computed from, changed only through its transitions. Pure: the
    /// clock readings come in as arguments.
    struct StateMachine {
        /// The consumer's place in its group.
        enum Consumer: Equatable {
            /// Not assigned partitions yet, or left the group (shutdown, or the group was lost).
            case outside
            /// Assigned partitions by its group.
            case joined
        }

        /// Whether results can be published.
        enum Producer: Equatable {
            case healthy
            /// Kafka does not take results (it refuses them, or acknowledges none for long): why.
            case waiting(String)
            /// librdkafka reported a fatal error, with its reason.
            case fatal(String)
        }

        /// A credential APNs refused: its first reason and when, kept until it works again.
        struct BrokenCredential: Equatable {
            var reason: String
            var since: String
        }

        private(set) var consumer = Consumer.outside
        /// The last error librdkafka reported reaching Kafka (a broker refused, TLS or SASL failed),
        /// said while the consumer is outside its group; joining clears it.
        private(set) var kafkaError: String?
        private(set) var producer = Producer.healthy
        /// By credential name; a credential not listed is healthy.
        private(set) var brokenCredentials: [String: BrokenCredential] = [:]
        /// Every credential the worker is configured with (empty until said: then the credentials
        /// known are those broken).
        private(set) var configuredCredentials: Set<String> = []
        private(set) var lastHeartbeat: ContinuousClock.Instant

        init(now: ContinuousClock.Instant) {
            lastHeartbeat = now
        }

        mutating func heartbeat(now: ContinuousClock.Instant) { lastHeartbeat = now }
        mutating func consumerJoined() {
            consumer = .joined
            kafkaError = nil
        }
        /// Kept through a join's loss: librdkafka does not repeat an identical error for 30 s.
        /// A `summary` ("1/1 brokers are down") follows each broker's own error and says less: it
        /// replaces no other reason.
        mutating func kafkaFailed(_ reason: String, summary: Bool) {
            if summary, kafkaError != nil { return }
            kafkaError = reason
        }
        mutating func consumerLeft() { consumer = .outside }
        mutating func producerFailed(_ reason: String) { producer = .fatal(reason) }
        /// A fatal error stays (the worker stops); anything else is replaced.
        mutating func resultsWaiting(_ reason: String) {
            if case .fatal = producer { return }
            producer = .waiting(reason)
        }
        mutating func producerRecovered() {
            if case .fatal = producer { return }
            producer = .healthy
        }

        /// The first reason and time stay until the credential is healthy again, so "since" tells how
        /// long it has been broken.
        mutating func credentialBroken(_ name: String, reason: String, since: String) {
            if brokenCredentials[name] == nil {
                brokenCredentials[name] = BrokenCredential(reason: reason, since: since)
            }
        }

        mutating func credentialHealthy(_ name: String) { brokenCredentials[name] = nil }

        mutating func configured(credentials: [String]) { configuredCredentials = Set(credentials) }

        /// Whether no credential can push: every one configured is broken. One app's broken key is
        /// that app's trouble (its events are dead-lettered, its gauge and alert say so); the pod
        /// still pushes for every other app, and a restart would fix nothing.
        var everyCredentialBroken: Bool {
            guard !brokenCredentials.isEmpty else { return false }
            return configuredCredentials.isSubset(of: brokenCredentials.keys)
        }

        /// By credential name: files that changed and do not load, why and since when.
        private(set) var failingFiles: [String: BrokenCredential] = [:]

        mutating func credentialFiles(_ name: String, problem: String?, since: String) {
            guard let problem else {
                failingFiles[name] = nil
                return
            }
            failingFiles[name] = BrokenCredential(reason: problem, since: failingFiles[name]?.since ?? since)
        }

        /// A readiness check's text: "ok", or each credential's problem and since when, by name.
        private static func check(_ problems: [String: BrokenCredential]) -> String {
            problems.isEmpty
                ? "ok"
                : problems.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.reason) since \($0.value.since)" }
                    .joined(separator: "; ")
        }

        func isLive(now: ContinuousClock.Instant, window: Duration) -> Bool {
            now - lastHeartbeat <= window
        }

        var readiness: HealthState.Readiness {
            let kafka: String
            switch (producer, consumer) {
            case (.fatal(let reason), _): kafka = "producer fatal: \(reason)"
            case (.waiting(let reason), _): kafka = "waiting for Kafka to accept results: \(reason)"
            case (.healthy, .outside):
                kafka = "consumer has not joined its group" + (kafkaError.map { "; last Kafka error: \($0)" } ?? "")
            case (.healthy, .joined): kafka = "ok"
            }

            return HealthState.Readiness(
                kafka: kafka, credentials: Self.check(brokenCredentials), everyCredentialBroken: everyCredentialBroken,
                credentialFiles: Self.check(failingFiles))
        }
    }
}
