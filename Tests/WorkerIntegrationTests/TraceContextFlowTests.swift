import Foundation
import Kafka
import Testing
import WorkerDemo

/// A producer's trace id followed through a running worker into the result record, as a consumer of
/// the results topic reads it.
@Suite("Trace context through a running worker", .timeLimit(.minutes(3)))
struct TraceContextFlowTests {
    @Test("a producer's traceparent and tracestate reach the event's result; a malformed one is left out and counted")
    func producerToResult() async throws {
        let harness = try await Harness.start(partitions: 1)
        defer { Task { await harness.shutdown() } }
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        var traced = DeliveryUnderFailureTests.event("traced", token: 1)
        traced.headers += [
            KafkaHeader(key: "traceparent", string: parent), KafkaHeader(key: "tracestate", string: "vendor=abc"),
        ]
        var malformed = DeliveryUnderFailureTests.event("malformed", token: 2)
        malformed.headers.append(KafkaHeader(key: "traceparent", string: "00-not-a-trace-01"))
        let plain = DeliveryUnderFailureTests.event("plain", token: 3)
        try await harness.produce([traced, malformed, plain])
        let worker = try harness.startWorker(group: "trace-flow")
        _ = try await harness.results(3)
        let records = try await harness.allRecords(of: EmbeddedStack.resultsTopic)
        func headers(of id: String) throws -> [KafkaHeader] {
            try #require(records.first { $0.key == Array(id.utf8) }, "no result for \(id)").headers
        }
        let tracedHeaders = try headers(of: "traced")
        #expect(tracedHeaders.lastString("traceparent") == parent)
        #expect(tracedHeaders.lastString("tracestate") == "vendor=abc")
        #expect(try headers(of: "malformed").map(\.key) == ["content-type"])
        #expect(try headers(of: "plain").map(\.key) == ["content-type"])
        var bytes: [UInt8] = []
        worker.assembly.beforeScrape()
        worker.assembly.registry.emit(into: &bytes)
        let scrape = String(decoding: bytes, as: UTF8.self)
        #expect(scrape.contains(#"apns_worker_trace_context_ignored_total{reason="malformed-traceparent"} 1"#))
        try await worker.stop()
    }
}
