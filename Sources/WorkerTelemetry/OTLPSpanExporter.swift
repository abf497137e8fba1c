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

/// The `OTEL_*` values swift-otel would stop the process on (it traps rather than failing) or that
/// this build cannot honour, refused as a configuration error naming the variable.
package enum OTLPEnvironment {
    /// How long an export may take, at shutdown too.
    static let exportTimeout: Duration = .seconds(5)

    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// `OTEL_SDK_DISABLED=true`: no spans, as every OpenTelemetry SDK reads it.
    package static func isDisabled(_ environment: [String: String]) -> Bool {
        environment["OTEL_SDK_DISABLED"]?.lowercased() == "true"
    }

    /// The first problem with `environment`'s `OTEL_*` variables, `nil` when there is none.
    package static func problem(_ environment: [String: String]) -> String? {
        if let value = environment["OTEL_PROPAGATORS"] {
            let names = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if names.contains(where: { $0 != "tracecontext" }) {
                return "OTEL_PROPAGATORS=\(value): the worker reads and writes W3C trace context only "
                    + "(baggage, b3, jaeger, xray and none are not supported); set it to tracecontext or unset it"
            }
        }
        for name in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
            if let value = environment[name], !["http/protobuf", "http/json"].contains(value.lowercased()) {
                return "\(name)=\(value): the worker exports over OTLP/HTTP (http/protobuf or http/json), not \(value)"
            }
        }
        if let value = environment["OTEL_TRACES_SAMPLER"],
            ["xray", "jaeger_remote", "parentbased_jaeger_remote"].contains(value.lowercased())
        {
            return "OTEL_TRACES_SAMPLER=\(value): not supported; use tracing.sampleRatio, or "
                + "parentbased_traceidratio, traceidratio, always_on or always_off"
        }
        return nil
    }
}
