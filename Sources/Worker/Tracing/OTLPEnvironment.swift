import Foundation

/// The `OTEL_*` values swift-otel would stop the process on (it traps rather than failing) or that
/// this build cannot honour, refused as a configuration error naming the variable: by `check`, and
/// by the exporter (WorkerTelemetry) before swift-otel reads them.
package enum OTLPEnvironment {
    /// How long an export may take, at shutdown too.
    package static let exportTimeout: Duration = .seconds(5)

    package struct Refused: Error, CustomStringConvertible {
        package let description: String

        package init(description: String) {
            self.description = description
        }
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
