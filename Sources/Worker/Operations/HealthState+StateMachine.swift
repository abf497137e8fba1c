/// What liveness and readiness are computed from. Pure: the clock readings come in as arguments.
struct HealthStateMachine {
    struct BrokenCredential: Equatable {
        var reason: String
        var since: String
    }

    var consumerJoined = false
    var producerFatal: String? = nil
    /// By credential name, kept sorted when reported.
    var brokenCredentials: [String: BrokenCredential] = [:]
    var lastHeartbeat: ContinuousClock.Instant

    init(now: ContinuousClock.Instant) {
        lastHeartbeat = now
    }

    func isLive(now: ContinuousClock.Instant, window: Duration) -> Bool {
        now - lastHeartbeat <= window
    }

    var readiness: HealthState.Readiness {
        let kafka: String
        if let producerFatal {
            kafka = "producer fatal: \(producerFatal)"
        } else if !consumerJoined {
            kafka = "consumer has not joined its group"
        } else {
            kafka = "ok"
        }
        let credentials =
            brokenCredentials.isEmpty
            ? "ok"
            : brokenCredentials.sorted { $0.key < $1.key }
                .map { "\($0.key): \($0.value.reason) since \($0.value.since)" }
                .joined(separator: "; ")
        return HealthState.Readiness(kafka: kafka, credentials: credentials)
    }
}
