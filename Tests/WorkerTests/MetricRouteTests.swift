import Foundation
import Prometheus
import TestPeers
import Testing

@testable import Worker

/// Which app and which lane: APNs answers and both latency histograms carry the credential and the
/// lane, as an operator with two apps and an urgent lane reads them from `/metrics`.
@Suite("Per-app and per-lane series")
struct MetricRouteTests {
    static func scrape(_ registry: PrometheusCollectorRegistry) -> [Substring] {
        var bytes: [UInt8] = []
        registry.emit(into: &bytes)
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n")
    }

    @Test("each lane's observer labels its answers and events with the credential they used and its lane")
    func answersAndEventsByCredentialAndLane() {
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        let health = HealthState()
        let bulk = OperationsObserver(metrics: metrics, health: health)
        let urgent = OperationsObserver(metrics: metrics, health: health, lane: .urgent)
        for _ in 0..<3 {
            bulk.apnsAnswered(status: 429, reason: "TooManyRequests", credential: "shop", duration: .zero)
        }
        bulk.apnsAnswered(status: 200, reason: nil, credential: "news", duration: .milliseconds(5))
        urgent.apnsAnswered(status: 200, reason: nil, credential: "shop", duration: .milliseconds(2))
        bulk.completed(.delivered, credential: "news", duration: .milliseconds(40))
        urgent.completed(.delivered, credential: "shop", duration: .milliseconds(8))
        bulk.completed(.invalid, credential: nil, duration: .milliseconds(1))
        let lines = Self.scrape(registry)
        for line in [
            #"apns_worker_apns_requests_total{status="429",reason="TooManyRequests",credential="shop",lane="bulk"} 3"#,
            #"apns_worker_apns_requests_total{status="200",reason="",credential="news",lane="bulk"} 1"#,
            #"apns_worker_apns_requests_total{status="200",reason="",credential="shop",lane="urgent"} 1"#,
            #"apns_worker_apns_request_duration_seconds_count{credential="shop",lane="urgent"} 1"#,
            #"apns_worker_event_duration_seconds_count{credential="news",lane="bulk"} 1"#,
            #"apns_worker_event_duration_seconds_count{credential="shop",lane="urgent"} 1"#,
            // An event that reached no credential (here: not a valid event).
            #"apns_worker_event_duration_seconds_count{credential="none",lane="bulk"} 1"#,
        ] {
            #expect(lines.contains { $0 == line }, "missing \(line)")
        }
        #expect(
            !lines.contains { $0.contains(#"credential="shop",lane="bulk""#) && $0.hasPrefix("apns_worker_event_") })
    }

    @Test("the series count is bounded by the configuration, whatever the answers and events say")
    func boundedByConfiguration() {
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        let credentials = ["shop", "news"]
        metrics.register(lane: .bulk, credentials: credentials)
        metrics.register(lane: .urgent, credentials: credentials)
        var random = TestPeers.SplitMix64(state: 20_261_206)
        let statuses: [Int?] = [200, 400, 403, 410, 429, 500, 503, nil, 418, 999]
        for index in 0..<2_000 {
            let lane = WorkerMetrics.Lane.allCases.randomElement(using: &random)!
            let credential = (credentials + [nil]).randomElement(using: &random)!
            let status = statuses.randomElement(using: &random)!
            // Reasons from anywhere: Apple's, a proxy's page, a number.
            let reason = ["", "BadDeviceToken", "TooManyRequests", "<html>\(index)", "\(index)"].randomElement(
                using: &random)!
            metrics.apnsRequest(status: status, reason: reason, credential: credential, lane: lane, duration: .zero)
            metrics.eventFinished(duration: .milliseconds(index % 100), credential: credential, lane: lane)
        }
        let lines = Self.scrape(registry)
        let requestSeries = lines.filter { $0.hasPrefix("apns_worker_apns_requests_total{") }
        // (2 credentials + none) × 2 lanes × (9 statuses Apple documents here, none, other) ×
        // (3 known reasons and "", other): the bound; what was seen is under it.
        #expect(requestSeries.count <= 3 * 2 * 9 * 4, "\(requestSeries.count)")
        #expect(!requestSeries.contains { $0.contains("html") || $0.contains("reason=\"1") })
        let histograms = Set(
            lines.filter { $0.hasPrefix("apns_worker_event_duration_seconds_count{") }.map {
                $0.split(separator: " ")[0]
            })
        #expect(histograms.count == 3 * 2, "\(histograms)")
    }
}
