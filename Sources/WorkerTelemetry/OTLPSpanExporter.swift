import Foundation
import Logging
import OTel
import Tracing
import Worker

extension SpanExporter {
    /// swift-otel's tracer and its OTLP/HTTP exporter (protobuf, batched), for `tracing:`.
    ///
    /// OpenTelemetry's own `OTEL_*` variables refine it where set, as every OpenTelemetry SDK reads
    /// them (`OTEL_EXPORTER_OTLP_HEADERS` for a collector's credentials, `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// and `_TRACES_ENDPOINT`, which win over `tracing.endpoint`, `OTEL_RESOURCE_ATTRIBUTES`,
    /// `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER`...); the values this build cannot honour are refused first
    /// (`OTLPEnvironment`), and `OTEL_SDK_DISABLED=true` turns span export off.
    package static let otlp = SpanExporter { settings, logger in
        guard let url = settings.tracesURL else { preconditionFailure("span export without an endpoint") }
        let environment = ProcessInfo.processInfo.environment
        if OTLPEnvironment.isDisabled(environment) {
            logger.notice("OTEL_SDK_DISABLED=true: no spans are exported (tracing.endpoint is set)")
            return nil
        }
        if let problem = OTLPEnvironment.problem(environment) { throw OTLPEnvironment.Refused(description: problem) }
        var configuration = OTel.Configuration.default
        configuration.serviceName = settings.serviceName
        configuration.resourceAttributes["service.version"] = WorkerVersion.current
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.propagators = [.traceContext]
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.endpoint = url
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // A shutdown waits for the last batch after the pipelines drained: a collector that takes
        // connections and never answers may add this much, not OpenTelemetry's 30 s.
        configuration.traces.otlpExporter.timeout = OTLPEnvironment.exportTimeout
        configuration.traces.batchSpanProcessor.exportTimeout = OTLPEnvironment.exportTimeout
        // A producer's decision is followed; where there is none, `sampleRatio` of the traces.
        configuration.traces.sampler =
            .parentBasedTraceIDRatio(ratio: settings.sampleRatio) ?? .parentBasedAlwaysOn
        // The exporter's own problems (a collector unreachable, refusing) in the worker's log, each
        // at most once a minute, with secrets swift-otel would echo redacted.
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
