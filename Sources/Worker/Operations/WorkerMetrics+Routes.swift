import APNs
import CoreMetrics

/// The series that say which app and which lane: APNs answers and the two latency histograms carry
/// `credential` and `lane`. Both come from configuration, never from event data, so their count is
/// bounded by it: (credentials + 1) × lanes (2 at most) per status and reason Apple documents.
extension WorkerMetrics {
    /// Where an event went: the configured credential it was sent with and the lane that read it.
    struct Route: Hashable, Sendable {
        var credential: String
        var lane: Lane
    }

    /// The `credential` label of an event that reached no credential: not a valid event, too old, or
    /// no credential's topics match it (nothing was sent).
    package static let noCredential = "none"

    /// The `lane` label: `bulk` for the pipeline that reads every input topic that is not urgent (a
    /// worker without `consumer.lanes` has only that one), `urgent` for `consumer.lanes.urgent`'s.
    package enum Lane: String, Sendable, CaseIterable {
        case bulk
        case urgent
    }

    /// An APNs answer: `status` is the HTTP status ("200", "429", …) or `nil` for a transport
    /// failure (label "none"); `reason` is APNs's reason, or "" for none; `credential`: the configured
    /// credential the request used (`nil`: none matched, nothing was sent). `duration`: sent to answer.
    ///
    /// Labels come from a closed set, whatever was answered (APNs, or a proxy in between, can send any
    /// text): a reason Apple documents by its name, anything else `other`; the statuses Apple
    /// documents, anything else `other`.
    package func apnsRequest(
        status: Int?, reason: String, credential: String? = nil, lane: Lane = .bulk, duration: Duration
    ) {
        let status = status.map { Self.apnsStatuses.contains($0) ? String($0) : "other" } ?? "none"
        let reason: String =
            if reason.isEmpty { "" } else if case .unknown = APNsReason(reason) { "other" } else { reason }
        let route = Route(credential: credential ?? Self.noCredential, lane: lane)
        let series = apnsRequests.value(for: APNsSeries(status: status, reason: reason, route: route)) {
            let count = counter(
                "apns_worker_apns_requests_total",
                [
                    ("status", status), ("reason", reason), ("credential", route.credential),
                    ("lane", route.lane.rawValue),
                ])
            let duration = apnsRequestDurations.value(for: route) {
                timer("apns_worker_apns_request_duration_seconds", route)
            }
            return (count, duration)
        }
        series.count.increment()
        series.duration.recordNanoseconds(duration.nanoseconds)
    }

    /// Consumed to result acknowledged; `credential`: the one it was sent with, if any.
    package func eventFinished(duration: Duration, credential: String? = nil, lane: Lane = .bulk) {
        eventDuration(Route(credential: credential ?? Self.noCredential, lane: lane))
            .recordNanoseconds(duration.nanoseconds)
    }

    /// Makes the event histogram of each credential and of `none` exist on `lane` before its first
    /// event, so that a dashboard's per-lane and per-app panels have their series from the start.
    package func register(lane: Lane, credentials: [String]) {
        for credential in credentials + [Self.noCredential] {
            _ = eventDuration(Route(credential: credential, lane: lane))
        }
    }

    /// A consumed record's trace context was not carried; `reason`: a `TraceContext.Ignored`.
    package func traceContextIgnored(reason: String) {
        counter("apns_worker_trace_context_ignored_total", [("reason", reason)]).increment()
    }

    private func eventDuration(_ route: Route) -> CoreMetrics.Timer {
        eventDurations.value(for: route) { timer("apns_worker_event_duration_seconds", route) }
    }

    private func timer(_ name: String, _ route: Route) -> CoreMetrics.Timer {
        CoreMetrics.Timer(
            label: name, dimensions: [("credential", route.credential), ("lane", route.lane.rawValue)],
            factory: factory)
    }
}
