import Foundation
import Prometheus
import TestPeers
import Testing

@testable import Worker

@Suite("APNs answers as metric labels")
struct APNsRequestLabelTests {
    @Test("a reason or status APNs does not document (a proxy's, say) is counted as other, never as its own series")
    func unknownReasonsAreOther() {
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        for index in 0..<50 {
            metrics.apnsRequest(status: 400, reason: "ProxyError\(index) <html>", duration: .zero)
        }
        metrics.apnsRequest(status: 418, reason: "", duration: .zero)
        metrics.apnsRequest(status: 429, reason: "TooManyRequests", duration: .zero)
        var bytes: [UInt8] = []
        registry.emit(into: &bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        let series = text.split(separator: "\n").filter { $0.hasPrefix("apns_worker_apns_requests_total{") }
        #expect(series.count == 3, "\(series)")
        #expect(
            text.contains(
                #"apns_worker_apns_requests_total{status="400",reason="other",credential="none",lane="bulk"} 50"#),
            "\(series)")
        #expect(
            text.contains(
                #"apns_worker_apns_requests_total{status="other",reason="",credential="none",lane="bulk"} 1"#),
            "\(series)")
        #expect(
            text.contains(
                #"apns_worker_apns_requests_total{status="429",reason="TooManyRequests",credential="none",lane="bulk"} 1"#
            ))
    }
}

@Suite("What run says at start about certificates")
struct StartupCertificateLogTests {
    @Test("each certificate's expiry is logged at start at info, as docs/configuration.md says; a near one warns")
    func expiryAtInfo() {
        let log = CapturedLog()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let far = now.addingTimeInterval(-86_400)...now.addingTimeInterval(94 * 86_400)
        let near = now.addingTimeInterval(-86_400)...now.addingTimeInterval(10 * 86_400)
        WorkerRuntime.checkCertificates(
            [("shop", far), ("legacy", near)], now: now,
            metrics: WorkerMetrics(registry: PrometheusCollectorRegistry()), observer: NoPipelineObserver(),
            logger: log.logger(level: .info))
        #expect(
            log.lines.contains { $0.hasPrefix("info: credential shop: the certificate expires on") }, "\(log.lines)")
        #expect(log.lines.contains { $0.hasPrefix("warning: credential legacy:") }, "\(log.lines)")
    }
}
