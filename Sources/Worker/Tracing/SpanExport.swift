import Logging
import OTel
import ServiceLifecycle
import Tracing

/// Span export for `tracing:` (docs/worker.md, "Trace context"): swift-otel's tracer and its
/// OTLP/HTTP exporter (protobuf), batched. `service` posts the spans; it runs in the worker's
/// service group, and stops after the pipelines (services stop in reverse order), so the spans of
/// their drain are sent before the worker exits.
///
/// OpenTelemetry's own `OTEL_*` variables refine it where set (`OTEL_EXPORTER_OTLP_HEADERS` for a
/// collector's credentials, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER`...), as every OpenTelemetry SDK reads them.
package struct SpanExport: Sendable {
    package let tracer: any Tracer
    package let service: any Service

    /// `nil` when `settings` configure none.
    package init?(settings: TracingSettings, logger: Logger) throws {
        guard let url = settings.tracesURL else { return nil }
        var configuration = OTel.Configuration.default
        configuration.serviceName = settings.serviceName
        configuration.resourceAttributes["service.version"] = WorkerVersion.current
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.propagators = [.traceContext]
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.endpoint = url
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // A producer's decision is followed; where there is none, `sampleRatio` of the traces.
        configuration.traces.sampler =
            .parentBasedTraceIDRatio(ratio: settings.sampleRatio) ?? .parentBasedAlwaysOn
        // The exporter's own problems (a collector unreachable, refusing) in the worker's log.
        var diagnostics = logger
        diagnostics[metadataKey: "component"] = "span-export"
        configuration.diagnosticLogger = .custom(diagnostics)
        configuration.diagnosticLogLevel = .warning
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        tracer = backend.factory
        service = backend.service
    }
}
