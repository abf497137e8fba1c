/// `tracing:` — OpenTelemetry span export over OTLP/HTTP (docs/worker.md, "Trace context"). Off
/// unless `endpoint` is set; the trace context of an input record is carried into its result and
/// dead letter either way.
package struct TracingSettings: Sendable, Hashable {
    /// What an event's span is the child of (the span always links to the producer's context).
    package enum Parent: String, Sendable, Hashable, CaseIterable {
        /// The producer's context, when the record carries one: the push shows in the producer's trace.
        case producer
        /// None: each event's span begins a trace of its own, reached from the producer's through its link.
        case none
    }

    /// The collector's OTLP/HTTP base URL (`http://otel-collector:4318`); spans go to
    /// `<endpoint>/v1/traces`. `nil`: no span is made.
    package var endpoint: String?
    /// The share of traces sampled where the producer did not decide (parent-based: a producer's
    /// sampled flag is followed).
    package var sampleRatio: Double = 1
    package var parent: Parent = .producer
    /// `service.name` of the spans' resource.
    package var serviceName = "apns-worker"

    package init() {}

    package var isEnabled: Bool { endpoint != nil }

    /// Where spans are posted: `endpoint` with `/v1/traces` appended, as OpenTelemetry's
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` is read.
    package var tracesURL: String? {
        endpoint.map { $0.hasSuffix("/") ? "\($0)v1/traces" : "\($0)/v1/traces" }
    }

    /// The problem with `text` as an endpoint, `nil` when there is none: `http` or `https`, a host,
    /// no user or password (a collector's credentials go in `OTEL_EXPORTER_OTLP_HEADERS`), no query.
    static func endpointProblem(_ text: String) -> String? {
        let lower = text.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            return "expected an http:// or https:// URL such as http://otel-collector:4318"
        }
        let rest = text.drop(while: { $0 != ":" }).dropFirst(3)
        let authority = rest.prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" })
        guard !authority.contains("@") else {
            return "a URL with a user or password is refused (it would be printed); "
                + "give the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS"
        }
        guard !authority.isEmpty, !authority.hasPrefix(":") else { return "the URL has no host" }
        guard !rest.contains("?"), !rest.contains("#") else { return "the URL may not have a query or fragment" }
        return nil
    }
}

extension WorkerConfiguration {
    /// `tracing:`, typed and checked.
    static func decodeTracing(_ section: inout ConfigSection) -> TracingSettings {
        var tracing = TracingSettings()
        if let endpoint = section.string("endpoint") {
            if let problem = TracingSettings.endpointProblem(endpoint) {
                section.report(section.error("endpoint", section.node("endpoint"), problem))
            } else {
                tracing.endpoint = endpoint
            }
        }
        tracing.sampleRatio = section.fraction("sampleRatio") ?? tracing.sampleRatio
        tracing.parent = section.choice("parent", TracingSettings.Parent.allCases) ?? tracing.parent
        tracing.serviceName = section.string("serviceName") ?? tracing.serviceName
        return tracing
    }
}
