import Foundation
import Kafka
import Logging
import TestPeers
import Testing
import Worker
import WorkerDemo
import WorkerTelemetry

/// Span export (`tracing:`) as a collector sees it: a running worker posts its spans over OTLP/HTTP to
/// a receiver the test started (OpenTelemetry's own protobuf bindings decode them), and a consumer of
/// the results topic follows a producer's trace id into the result record.
@Suite("Span export to an OTLP receiver", .serialized, .timeLimit(.minutes(4)))
struct SpanExportTests {
    static let producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let producerSpan = "00f067aa0ba902b7"
    static let parent = "00-\(producerTrace)-\(producerSpan)-01"

    /// `id`, with `headers` added to its record.
    static func event(_ id: String, token: Int, headers: [(String, String)] = []) -> KafkaProducerMessage {
        var event = DeliveryUnderFailureTests.event(id, token: token)
        event.headers += headers.map { KafkaHeader(key: $0.0, string: $0.1) }
        return event
    }

    /// The events of both tests: one traced by a sampled producer, one by a producer that did not
    /// sample, one with no context, one with a malformed `traceparent`, one whose `tracestate` the
    /// tracer cannot read, and a poison record traced.
    static func events() -> [KafkaProducerMessage] {
        [
            event("traced", token: 1, headers: [("traceparent", parent), ("tracestate", "vendor=abc")]),
            event("unsampled", token: 2, headers: [("traceparent", "00-\(producerTrace)-\(producerSpan)-00")]),
            event("plain", token: 3),
            event("malformed", token: 4, headers: [("traceparent", "00-xyz-01")]),
            // A tracestate the W3C allows (an empty member) that swift-otel's parser refuses.
            event("odd-state", token: 5, headers: [("traceparent", parent), ("tracestate", "a=1,,b=2")]),
            KafkaProducerMessage(
                topic: EmbeddedStack.inputTopic, partition: 0, key: Array("poison".utf8), value: Array("{nope".utf8),
                headers: [KafkaHeader(key: "traceparent", string: parent)]),
        ]
    }

    /// Runs a worker exporting to a new receiver until the five events have results, stops it (which
    /// sends what its exporter holds), and returns the spans, the results by key and the dead letter.
    static func run(parent: TracingSettings.Parent, group: String) async throws -> (
        spans: [OTLPReceiver.Span], results: [String: KafkaConsumerMessage], deadLetter: KafkaConsumerMessage
    ) {
        let receiver = try await OTLPReceiver.start()
        defer { Task { await receiver.shutdown() } }
        let harness = try await Harness.start(partitions: 1)
        defer { Task { await harness.shutdown() } }
        harness.stack.simulator.devices.policy = .accept
        try await harness.produce(events())
        let worker = try harness.startWorker(group: group) {
            $0.tracing.endpoint = receiver.endpoint
            $0.tracing.parent = parent
        }
        _ = try await harness.results(6)
        let deadLetters = try await harness.deadLetters(1)
        try await worker.stop()
        // Five spans: the producer that did not sample is followed (parent-based sampling).
        let spans = try await receiver.spans(atLeast: 5)
        #expect(receiver.log.contains("undecodable") == false, "\(receiver.log)")
        let records = try await harness.allRecords(of: EmbeddedStack.resultsTopic)
        let results = Dictionary(records.map { (String(decoding: $0.key ?? [], as: UTF8.self), $0) }) { a, _ in a }
        return (spans, results, try #require(deadLetters.first))
    }

    static func span(of id: String, in spans: [OTLPReceiver.Span]) throws -> OTLPReceiver.Span {
        try #require(spans.first { $0.attributes["messaging.message.id"] == .string(id) }, "no span for \(id)")
    }

    static func apnsID(of record: KafkaConsumerMessage?) throws -> String {
        let value = try #require(record?.value)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(value)) as? [String: Any])
        return try #require(object["apnsId"] as? String)
    }

    @Test(
        "each event's span, a child of and linked to its producer's, reaches the receiver; the result and the dead letter carry the worker's span"
    )
    func producerToResult() async throws {
        let (spans, results, deadLetter) = try await Self.run(parent: .producer, group: "spans-parent")
        #expect(spans.count == 5, "\(spans.map(\.name))")

        let traced = try Self.span(of: "traced", in: spans)
        #expect(traced.name == "process \(EmbeddedStack.inputTopic)")
        #expect(traced.kind == 5, "consumer")
        #expect(traced.traceID == Self.producerTrace)
        #expect(traced.parentSpanID == Self.producerSpan)
        #expect(traced.links.map(\.traceID) == [Self.producerTrace])
        #expect(traced.links.map(\.spanID) == [Self.producerSpan])
        #expect(traced.startUnixNano > 0 && traced.startUnixNano <= traced.endUnixNano)
        let expected: [String: OTLPReceiver.Value] = [
            "messaging.system": .string("kafka"),
            "messaging.operation.type": .string("process"),
            "messaging.destination.name": .string(EmbeddedStack.inputTopic),
            "messaging.destination.partition.id": .string("0"),
            "messaging.consumer.group.name": .string("spans-parent"),
            "messaging.kafka.offset": .int(0),
            "apns_worker.outcome": .string("delivered"),
            "apns_worker.attempts": .int(1),
            "apns_worker.credential": .string("demo"),
            "apns_worker.lane": .string("bulk"),
            "apns.status_code": .int(200),
        ]
        for (key, value) in expected { #expect(traced.attributes[key] == value, "\(key)") }
        #expect(traced.attributes["apns.id"] == .string(try Self.apnsID(of: results["traced"])))
        #expect(traced.status.code == 0)
        #expect(traced.resource["service.name"] == .string("apns-worker"))

        // Downstream continues the producer's trace from the worker's span.
        let tracedResult = try #require(results["traced"])
        #expect(tracedResult.headers.lastString("traceparent") == "00-\(Self.producerTrace)-\(traced.spanID)-01")
        #expect(tracedResult.headers.lastString("tracestate") == "vendor=abc")

        // A tracestate the tracer refuses costs the state, not the producer's trace.
        let odd = try Self.span(of: "odd-state", in: spans)
        #expect(odd.traceID == Self.producerTrace && odd.parentSpanID == Self.producerSpan)
        #expect(odd.links.map(\.spanID) == [Self.producerSpan])
        #expect(results["odd-state"]?.headers.lastString("traceparent") == "00-\(Self.producerTrace)-\(odd.spanID)-01")

        // A producer that did not sample: no span, and the decision travels on with a span id of the worker's.
        #expect(spans.contains { $0.attributes["messaging.message.id"] == .string("unsampled") } == false)
        let unsampled = try #require(results["unsampled"]?.headers.lastString("traceparent"))
        #expect(unsampled.hasPrefix("00-\(Self.producerTrace)-") && unsampled.hasSuffix("-00"))
        #expect(!unsampled.contains(Self.producerSpan))

        // No context, or a malformed one: a trace of the worker's own, unlinked.
        for id in ["plain", "malformed"] {
            let span = try Self.span(of: id, in: spans)
            #expect(span.parentSpanID.isEmpty && span.links.isEmpty, "\(id)")
            #expect(span.traceID != Self.producerTrace)
            #expect(results[id]?.headers.lastString("traceparent") == "00-\(span.traceID)-\(span.spanID)-01")
        }

        // The poison record: an error span, and its dead letter carries the worker's span, so a
        // replay continues the trace from this failure.
        let poison = try #require(spans.first { $0.attributes["apns_worker.outcome"] == .string("invalid") })
        #expect(poison.status.code == 2)
        #expect(poison.attributes["error.type"] == .string("malformedJSON"))
        #expect(poison.attributes["apns_worker.dead_letter.reason"] == .string("malformed-json"))
        #expect(poison.parentSpanID == Self.producerSpan)
        #expect(deadLetter.headers.lastString("traceparent") == "00-\(Self.producerTrace)-\(poison.spanID)-01")
        #expect(deadLetter.headers.filter { $0.key == "traceparent" }.count == 1)
    }

    @Test("tracing.parent none: each event a trace of its own, linked to the producer's")
    func linkOnly() async throws {
        let (spans, results, _) = try await Self.run(parent: .none, group: "spans-link")
        let traced = try Self.span(of: "traced", in: spans)
        #expect(traced.parentSpanID.isEmpty)
        #expect(traced.traceID != Self.producerTrace)
        #expect(traced.links.map(\.traceID) == [Self.producerTrace])
        #expect(traced.links.map(\.spanID) == [Self.producerSpan])
        let header = try #require(results["traced"]?.headers.lastString("traceparent"))
        #expect(header == "00-\(traced.traceID)-\(traced.spanID)-01")
        // The producer's tracestate belongs to the producer's trace: it does not go on with another.
        #expect(results["traced"]?.headers.lastString("tracestate") == nil)
    }

    @Test("a collector that is down costs its spans, logged, not an event nor the shutdown")
    func collectorDown() async throws {
        let nobody = try freeLoopbackPort()
        let harness = try await Harness.start(partitions: 1)
        defer { Task { await harness.shutdown() } }
        harness.stack.simulator.devices.policy = .accept
        try await harness.produce((0..<20).map { DeliveryUnderFailureTests.event("down-\($0)", token: $0 + 1) })
        let log = CapturedLog()
        let worker = try harness.startWorker(group: "spans-down", logger: log.logger(level: .warning)) {
            $0.tracing.endpoint = "http://127.0.0.1:\(nobody)"
        }
        let results = try await harness.results(20)
        #expect(results.map(\.outcome) == Array(repeating: .delivered, count: 20))
        try await worker.stop()
        let export = log.all.filter { $0.metadata["subsystem"] == "span-export" }
        #expect(!export.isEmpty, "the exporter's failure is logged: \(log.all.suffix(3))")
    }

    @Test("a collector that takes the connection and never answers adds at most the export time-out to a shutdown")
    func collectorSilent() async throws {
        // A listening socket nobody accepts from: the kernel completes the connection and takes the
        // request, and no answer ever comes.
        let port = try freeLoopbackPort()
        let listener = try #require(silentListener(port: port))
        defer { close(listener) }
        let harness = try await Harness.start(partitions: 1)
        defer { Task { await harness.shutdown() } }
        harness.stack.simulator.devices.policy = .accept
        try await harness.produce((0..<10).map { DeliveryUnderFailureTests.event("silent-\($0)", token: $0 + 1) })
        let worker = try harness.startWorker(group: "spans-silent") { $0.tracing.endpoint = "http://127.0.0.1:\(port)" }
        #expect(try await harness.results(10).count == 10)
        let stopping = ContinuousClock.now
        try await worker.stop()
        let took = ContinuousClock.now - stopping
        // The pipeline's drain (nothing in flight) and the last batch's export, given up after 5 s;
        // OpenTelemetry's default export time-out alone is 30 s.
        #expect(took < .seconds(20), "the shutdown took \(took)")
    }

    @Test(
        "a replayed dead letter's span is a child of the failed push's: producer, failed push, replayed push in one trace"
    )
    func replayContinuesTheTrace() async throws {
        let receiver = try await OTLPReceiver.start()
        defer { Task { await receiver.shutdown() } }
        let harness = try await Harness.start(partitions: 1)
        defer { Task { await harness.shutdown() } }
        let poison = KafkaProducerMessage(
            topic: EmbeddedStack.inputTopic, partition: 0, key: Array("poison".utf8), value: Array("{nope".utf8),
            headers: [KafkaHeader(key: "traceparent", string: Self.parent)])
        try await harness.produce([poison])
        let worker = try harness.startWorker(group: "spans-replay") { $0.tracing.endpoint = receiver.endpoint }
        _ = try await harness.deadLetters(1)
        var request = ReplayRequest(deadLetterTopic: EmbeddedStack.deadLetterTopic)
        request.reasons = [.malformedJSON]
        let bootstrap = harness.stack.cluster.bootstrapServers
        let report = try await DeadLetterReplayer(
            consumerConfiguration: KafkaConsumerConfiguration(bootstrapServers: bootstrap, groupID: "replay"),
            producerConfiguration: KafkaProducerConfiguration(bootstrapServers: bootstrap), logger: harness.logger
        ).run(request)
        #expect(report.count(.replayed) == 1)
        _ = try await harness.results(2)
        try await worker.stop()
        let spans = try await receiver.spans(atLeast: 2)
        let first = try #require(spans.first { $0.attributes["messaging.kafka.offset"] == .int(0) })
        let replayed = try #require(spans.first { $0.attributes["messaging.kafka.offset"] == .int(1) })
        #expect(first.parentSpanID == Self.producerSpan)
        #expect(replayed.traceID == Self.producerTrace)
        #expect(replayed.parentSpanID == first.spanID)
        #expect(replayed.links.map(\.spanID) == [first.spanID])
        #expect(replayed.attributes["apns_worker.replays"] == .int(1))
    }

    @Test(
        "OTEL_* values this build cannot honour are refused naming the variable (swift-otel would trap)",
        arguments: [
            ["OTEL_PROPAGATORS": "tracecontext,baggage"], ["OTEL_PROPAGATORS": "b3"],
            ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"],
            ["OTEL_TRACES_SAMPLER": "jaeger_remote"],
        ])
    func environmentRefused(environment: [String: String]) throws {
        let problem = try #require(OTLPEnvironment.problem(environment))
        #expect(problem.hasPrefix(environment.keys.first! + "="))
    }

    @Test("OTEL_* values it honours pass; OTEL_SDK_DISABLED=true turns span export off")
    func environmentTaken() {
        #expect(
            OTLPEnvironment.problem([
                "OTEL_PROPAGATORS": "tracecontext", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_EXPORTER_OTLP_HEADERS": "a=b",
            ]) == nil)
        #expect(OTLPEnvironment.isDisabled(["OTEL_SDK_DISABLED": "true"]))
        #expect(!OTLPEnvironment.isDisabled([:]))
    }

    @Test("the exporter's log never shows a collector's token, and one message is let through once a minute")
    func exporterLog() {
        let log = CapturedLog()
        var logger = Logger(label: "x") { _ in ThrottledLogHandler(base: log.logger(level: .trace)) }
        logger.logLevel = .trace
        // As swift-otel says which variable it read.
        logger[metadataKey: "environment_key"] = "OTEL_EXPORTER_OTLP_HEADERS"
        logger[metadataKey: "environment_value"] = "Authorization: Bearer s3cr3t"
        logger.warning("Failed to update configuration from environment")
        logger.warning("Failed to update configuration from environment")
        #expect(log.all.count == 1)
        #expect(log.all.first?.metadata["environment_value"] == "<redacted>")
        #expect(!"\(log.all)".contains("s3cr3t"))
    }
}
