import Foundation
import Kafka
import Tracing

/// A span per consumed event, when span export is configured (`tracing:`; docs/worker.md,
/// "Trace context"), following OpenTelemetry's messaging conventions for Kafka: `process <topic>`,
/// kind consumer, from the record taken to its result stored.
///
/// The span is made when the event's result is final, with the start time the record was taken
/// at, so that its context can go into the dead letter and the result record (the worker's span,
/// which downstream continues); it ends once the result is stored. An event given up before its
/// result (its partition handed over, a forced shutdown) has no span: the partition's next owner
/// makes it.
///
/// Parent and link: a record that carries a well-formed W3C `traceparent` (`TraceContext`) is
/// linked to that context, as the conventions recommend for consumers. Its parent is that context
/// too (`TracingSettings.Parent.producer`, the default: processing is one message at a time, which
/// the conventions allow to parent, and the push then shows in the producer's trace) or none
/// (`.none`: every event a trace of its own, reached through the link).
package final class EventSpans: Sendable {
    let tracer: any Tracer
    let parent: TracingSettings.Parent
    let consumerGroup: String
    /// `bulk` or `urgent`, as the metrics' `lane` label.
    let lane: String

    package init(tracer: any Tracer, parent: TracingSettings.Parent, consumerGroup: String, lane: String) {
        self.tracer = tracer
        self.parent = parent
        self.consumerGroup = consumerGroup
        self.lane = lane
    }

    /// The span of `record`'s event, whose result is final (`result`), taken at `taken` and final at
    /// `completed`; `trace`: the record's own context as read (`TraceContext`: only a well-formed one
    /// is followed).
    func begin(
        record: KafkaConsumerMessage, trace: TraceContext, result: EventResult, taken: Date, completed: Date
    ) -> EventSpan {
        let producer = producerContext(trace)
        let linked = !producer.isEmpty
        let span = tracer.startSpan(
            "process \(record.topic)", context: parent == .producer ? producer : .topLevel, ofKind: .consumer,
            at: Self.instant(taken))
        if linked { span.addLink(SpanLink(context: producer, attributes: [:])) }
        if span.isRecording {
            span.updateAttributes { attributes in
                describe(record: record, result: result, into: &attributes)
            }
            if let error = Self.errorType(of: result) {
                span.attributes["error.type"] = error
                span.setStatus(SpanStatus(code: .error, message: "\(result.outcome.rawValue): \(error)"))
            }
        }
        // The worker's span, with the producer's `tracestate` when the trace is the producer's (the
        // tracer carries a parent's state to its child). A tracer that injects no `traceparent` (a
        // sampler that drops without making a context, `OTEL_PROPAGATORS=none`) leaves the record's
        // own context to be carried, as without span export.
        var headers: [KafkaHeader] = []
        tracer.inject(span.context, into: &headers, using: KafkaHeaderInjector())
        let carried = headers.contains { $0.key == TraceContext.parentHeader } ? headers : trace.headers
        return EventSpan(span: span, input: trace, headers: carried, completed: completed)
    }

    /// The producer's context as the tracer reads it from the record's carried `traceparent` (and
    /// `tracestate`); empty when there is none. A `tracestate` this worker carries but the tracer's
    /// stricter parser refuses (an empty member, upper case in a key) costs only the state: the
    /// `traceparent` is read alone.
    private func producerContext(_ trace: TraceContext) -> ServiceContext {
        var producer = ServiceContext.topLevel
        guard !trace.headers.isEmpty else { return producer }
        tracer.extract(trace.headers, into: &producer, using: KafkaHeaderExtractor())
        if producer.isEmpty, trace.headers.count > 1 {
            let parentOnly = trace.headers.filter { $0.key == TraceContext.parentHeader }
            tracer.extract(parentOnly, into: &producer, using: KafkaHeaderExtractor())
        }
        return producer
    }

    /// The messaging conventions' attributes (Kafka), and the push's own.
    private func describe(record: KafkaConsumerMessage, result: EventResult, into attributes: inout SpanAttributes) {
        attributes["messaging.system"] = "kafka"
        attributes["messaging.operation.type"] = "process"
        attributes["messaging.operation.name"] = "process"
        attributes["messaging.destination.name"] = record.topic
        attributes["messaging.destination.partition.id"] = String(record.partition)
        attributes["messaging.consumer.group.name"] = consumerGroup
        attributes["messaging.kafka.offset"] = Int64(record.offset)
        attributes["messaging.message.body.size"] = record.value?.count ?? 0
        // An invalid record's id may be as long as its record: kept only where a degraded result
        // keeps it, so that a batch of spans stays within what a collector takes.
        if let id = result.eventID, !id.isEmpty, id.utf8.count <= DeadLetterRecord.degradedKeyLimit {
            attributes["messaging.message.id"] = id
        }
        attributes["apns_worker.outcome"] = result.outcome.rawValue
        attributes["apns_worker.attempts"] = result.attempts
        attributes["apns_worker.lane"] = lane
        if let credential = result.credential { attributes["apns_worker.credential"] = credential }
        if result.replays > 0 { attributes["apns_worker.replays"] = result.replays }
        if let reason = result.deadLetter { attributes["apns_worker.dead_letter.reason"] = reason.rawValue }
        if let status = result.status { attributes["apns.status_code"] = status }
        if let reason = result.reason { attributes["apns.reason"] = reason }
        if let id = result.apnsID { attributes["apns.id"] = id }
        if let id = result.apnsRequestID { attributes["apns.request_id"] = id }
        if let id = result.apnsUniqueID { attributes["apns.unique_id"] = id }
    }

    /// Why the span is an error, `nil` when it is not: the event could not be pushed (`failed`), was
    /// not an event (`invalid`) or APNs refused it (`rejected`). Delivered, unregistered (APNs said
    /// the token is gone: the push ended as it must) and expired (too old, by configuration) are not
    /// errors of the processing.
    static func errorType(of result: EventResult) -> String? {
        switch result.outcome {
        case .failed, .invalid, .rejected: result.reason ?? result.outcome.rawValue
        case .delivered, .unregistered, .expired: nil
        }
    }

    static func instant(_ date: Date) -> DefaultTracerClock.Timestamp {
        DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: UInt64(max(date.timeIntervalSince1970, 0) * 1e9))
    }
}

/// One event's span, from its result final to its result stored.
struct EventSpan: Sendable {
    let span: any Span
    /// The record's own context as read when the span was made (the result counts what it ignored).
    let input: TraceContext
    /// The trace context the dead letter and the result carry: the worker's span.
    let headers: [KafkaHeader]
    let completed: Date

    /// The result is stored (`done`), or the event was given up before it was (its partition's next
    /// owner processes it again).
    func end(done: Bool, at now: Date) {
        if !done, span.isRecording {
            span.attributes["apns_worker.abandoned"] = true
            span.setStatus(SpanStatus(code: .error, message: "given up before its result was stored"))
        }
        span.end(at: EventSpans.instant(max(now, completed)))
    }
}

/// Reads a header of Kafka's (the last of its key, as Kafka clients read them) for a propagator.
struct KafkaHeaderExtractor: Extractor {
    func extract(key: String, from carrier: [KafkaHeader]) -> String? {
        carrier.last(where: { $0.key == key })?.stringValue
    }
}

/// Writes a propagator's header, replacing one of the same key.
struct KafkaHeaderInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [KafkaHeader]) {
        carrier.removeAll { $0.key == key }
        carrier.append(KafkaHeader(key: key, string: value))
    }
}
