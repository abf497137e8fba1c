import Foundation
import Kafka
import Prometheus
import Testing

@testable import Worker

/// A producer's W3C trace context rides from the input record into its result and dead letters, as
/// a downstream consumer of the results topic reads them; anything not of its form is left out and
/// counted, never failing the event.
@Suite("Trace context carried into results and dead letters")
struct TraceContextTests {
    static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    static let state = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"

    static func record(_ headers: [(String, String)]) -> KafkaConsumerMessage {
        KafkaConsumerMessage(
            topic: "events", partition: 2, offset: 41, key: Array("k".utf8), value: Array("{}".utf8),
            headers: headers.map { KafkaHeader(key: $0.0, string: $0.1) })
    }

    static func result(for source: KafkaConsumerMessage) -> KafkaProducerMessage {
        var result = EventResult(eventID: "e-1", outcome: .delivered, attempts: 1)
        result.status = 200
        let trace = TraceContext(headers: source.headers)
        return ResultRecord.message(
            for: result, source: source, latency: .milliseconds(4), completedAt: Date(), topic: "results",
            trace: trace.headers)
    }

    static func keys(_ message: KafkaProducerMessage) -> [String] { message.headers.map(\.key) }

    @Test("a well-formed traceparent and its tracestate reach the result record, after content-type")
    func carried() {
        let source = Self.record([("x-tenant", "acme"), ("traceparent", Self.parent), ("tracestate", Self.state)])
        let result = Self.result(for: source)
        #expect(Self.keys(result) == ["content-type", "traceparent", "tracestate"])
        #expect(result.headers.lastString("traceparent") == Self.parent)
        #expect(result.headers.lastString("tracestate") == Self.state)
        // Other headers of the input are the dead letter's business, not the result's.
        #expect(result.headers.lastString("x-tenant") == nil)
    }

    @Test("a record without trace context gets the result's one shared header")
    func none() {
        #expect(Self.keys(Self.result(for: Self.record([("x-tenant", "acme")]))) == ["content-type"])
        #expect(TraceContext(headers: []).ignored == nil)
    }

    @Test(
        "a traceparent not of its form, all-zero ids, or another version is ignored with its tracestate, and says why",
        arguments: [
            ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", TraceContext.Ignored.malformedParent),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", .malformedParent),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", .malformedParent),
            ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", .malformedParent),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", .malformedParent),
            ("00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", .malformedParent),
            ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", .malformedParent),
            ("", .malformedParent),
            ("\u{1F600}", .malformedParent),
            ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00", .unsupportedVersion),
        ])
    func ignoredParent(parent: String, reason: TraceContext.Ignored) {
        let source = Self.record([("traceparent", parent), ("tracestate", Self.state)])
        let trace = TraceContext(headers: source.headers)
        #expect(trace.ignored == reason)
        #expect(trace.headers.isEmpty)
        #expect(Self.keys(Self.result(for: source)) == ["content-type"])
    }

    @Test("a tracestate over 512 bytes, over 32 members or not key=value is dropped; its traceparent is kept")
    func badState() {
        let long = (0..<40).map { "k\($0)=\(String(repeating: "v", count: 10))" }.joined(separator: ",")
        let many = (0..<33).map { "k\($0)=v" }.joined(separator: ",")
        for state in [long, many, "no-equals-sign", "k=v\u{7}"] {
            let trace = TraceContext(
                headers: Self.record([("traceparent", Self.parent), ("tracestate", state)]).headers)
            #expect(trace.ignored == .badState, "\(state.prefix(40))")
            #expect(trace.headers.map(\.key) == ["traceparent"])
        }
        let exactly512 = "k=" + String(repeating: "v", count: 510)
        let kept = TraceContext(
            headers: Self.record([("traceparent", Self.parent), ("tracestate", exactly512)]).headers)
        #expect(kept.ignored == nil)
        #expect(kept.headers.map(\.key) == ["traceparent", "tracestate"])
    }

    @Test("the last traceparent counts, as Kafka clients read a repeated header")
    func lastWins() {
        let other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
        let trace = TraceContext(headers: Self.record([("traceparent", "garbage"), ("traceparent", other)]).headers)
        #expect(trace.ignored == nil)
        #expect(trace.headers.lastString("traceparent") == other)
    }

    @Test("the degraded result and dead letter (Kafka refused the full ones) keep the trace context")
    func degradedForms() throws {
        let source = Self.record([("traceparent", Self.parent), ("tracestate", Self.state), ("big", "x")])
        var result = EventResult(eventID: "e-1", outcome: .failed, attempts: 3)
        result.deadLetter = .retriesExhausted
        let error = KafkaError(code: .messageSizeTooLarge, message: "too large")
        // As the pipeline makes it: the form that rides in the publisher's attempt keeps the
        // record's coordinates, not its headers, so the context is handed to it.
        let form = ResultPublisher.Degradation.resultForm(
            of: result, source: source, latency: .zero, completedAt: Date(), topic: "results",
            trace: TraceContext(headers: source.headers).headers)
        let degradedResult = try #require(form.message(for: error))
        #expect(degradedResult.headers.lastString("traceparent") == Self.parent)
        #expect(degradedResult.headers.lastString("tracestate") == Self.state)
        let full = DeadLetterRecord.message(
            for: source, result: result, reason: .retriesExhausted, consumerGroup: "g", topic: "dead", now: Date())
        #expect(full.headers.lastString("traceparent") == Self.parent, "the full dead letter keeps every header")
        let degraded = DeadLetterRecord.degraded(full, source: source, error: error)
        #expect(degraded.headers.lastString("traceparent") == Self.parent)
        #expect(degraded.headers.lastString("tracestate") == Self.state)
        #expect(degraded.headers.lastString("big") == nil)
    }

    @Test("what was ignored is counted by reason, every reason at 0 from the start")
    func counted() {
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        let observer = OperationsObserver(metrics: metrics, health: HealthState())
        observer.traceContextIgnored(.unsupportedVersion)
        observer.traceContextIgnored(.unsupportedVersion)
        let lines = MetricRouteTests.scrape(registry)
        #expect(lines.contains(#"apns_worker_trace_context_ignored_total{reason="unsupported-version"} 2"#))
        #expect(lines.contains(#"apns_worker_trace_context_ignored_total{reason="malformed-traceparent"} 0"#))
        #expect(lines.contains(#"apns_worker_trace_context_ignored_total{reason="bad-tracestate"} 0"#))
    }
}
