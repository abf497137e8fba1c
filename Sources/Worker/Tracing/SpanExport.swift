import Logging
import ServiceLifecycle
import Tracing

/// Span export for `tracing:` (docs/worker.md, "Spans"): the tracer the pipelines make their spans
/// with, and the service that posts them. The service runs in the worker's service group and stops
/// after the pipelines (services stop in reverse order), so the spans of their drain are sent.
package struct SpanExport: Sendable {
    package let tracer: any Tracer
    package let service: any Service

    package init(tracer: any Tracer, service: any Service) {
        self.tracer = tracer
        self.service = service
    }
}

/// What makes a `SpanExport` from `tracing:`. The exporter itself (swift-otel, OTLP/HTTP) is in the
/// WorkerTelemetry module, `SpanExporter.otlp`, which the programs that run a worker hand to
/// `WorkerRuntime.assemble`; the Worker module does not build it, so neither does what builds that
/// module alone (the fuzz targets, in a sanitized build of their own).
package struct SpanExporter: Sendable {
    /// The export, or `nil` when the environment turns it off (`OTEL_SDK_DISABLED=true`).
    let make: @Sendable (TracingSettings, Logger) throws -> SpanExport?

    package init(_ make: @escaping @Sendable (TracingSettings, Logger) throws -> SpanExport?) {
        self.make = make
    }

    /// The export `settings` ask for; `nil` when they ask for none. Without an exporter, a
    /// configuration that asks for one is refused, not run without its spans.
    static func export(_ settings: TracingSettings, with exporter: SpanExporter?, logger: Logger) throws
        -> SpanExport?
    {
        guard settings.isEnabled else { return nil }
        guard let exporter else { throw NoSpanExporter() }
        return try exporter.make(settings, logger)
    }

    struct NoSpanExporter: Error, CustomStringConvertible {
        var description: String {
            "tracing.endpoint is set, but this program was built without a span exporter (apns-worker has one)"
        }
    }
}
