import Logging
import OTel
import Tracing
import Worker

extension SpanExporter {
    /// swift-otel's tracer and its OTLP/HTTP exporter (protobuf, batched), for `tracing:`.
    ///
    /// OpenTelemetry's own `OTEL_*` variables refine it where set (`OTEL_EXPORTER_OTLP_HEADERS` for a
    /// collector's credentials, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_RESOURCE_ATTRIBUTES`,
    /// `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER`...), as every OpenTelemetry SDK reads them.
    package static let otlp = SpanExporter { settings, logger in
        guard let url = settings.tracesURL else { preconditionFailure("span export without an endpoint") }
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
        diagnostics[metadataKey: "subsystem"] = "span-export"
        let throttled = ThrottledLogHandler(base: diagnostics)
        var throttledLogger = Logger(label: logger.label) { _ in throttled }
        throttledLogger.logLevel = .warning
        configuration.diagnosticLogger = .custom(throttledLogger)
        configuration.diagnosticLogLevel = .warning
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        return SpanExport(tracer: backend.factory, service: backend.service)
    }
}
