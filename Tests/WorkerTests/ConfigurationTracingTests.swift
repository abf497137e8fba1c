import Foundation
import Testing

@testable import Worker

/// `tracing:`: span export is off unless an endpoint is given; what is given is checked at its line.
@Suite("Configuration: span export (tracing)")
struct ConfigurationTracingTests {
    /// The minimal file with a `tracing:` section at line 13, its keys from line 14.
    static func yaml(_ lines: String) -> String {
        ConfigurationFixtures.minimalYAML + "\ntracing:\n"
            + lines.split(separator: "\n").map { "  " + $0 + "\n" }.joined()
    }

    func errors(_ text: String, environment: [String: String] = [:]) -> [String] {
        ConfigurationFixtures.errors(text, environment: environment)
    }

    @Test("off by default, and the summary says the trace context is still carried")
    func offByDefault() throws {
        let configuration = try WorkerConfiguration.parse(
            ConfigurationFixtures.minimalYAML, file: "worker.yaml", environment: [:])
        #expect(!configuration.tracing.isEnabled)
        #expect(try SpanExporter.export(configuration.tracing, with: nil, logger: .init(label: "test")) == nil)
        #expect(
            ConfigurationCheck.summary(configuration).contains(
                "tracing:      no spans (trace context carried into results and dead letters)"))
    }

    @Test("every key read; spans go to <endpoint>/v1/traces; the summary says so")
    func keys() throws {
        let configuration = try WorkerConfiguration.parse(
            Self.yaml(
                "endpoint: https://otel-collector.observability:4318\nsampleRatio: 0.25\nparent: none\nserviceName: pushes"
            ), file: "worker.yaml", environment: [:])
        let tracing = configuration.tracing
        #expect(tracing.tracesURL == "https://otel-collector.observability:4318/v1/traces")
        #expect(tracing.sampleRatio == 0.25)
        #expect(tracing.parent == .none)
        #expect(tracing.serviceName == "pushes")
        #expect(
            ConfigurationCheck.summary(configuration).contains(
                "tracing:      spans to https://otel-collector.observability:4318/v1/traces (OTLP/HTTP), sampled 0.25 where the producer did not decide, parent none, service pushes"
            ))
        let slash = try WorkerConfiguration.parse(
            Self.yaml("endpoint: http://collector:4318/"), file: "worker.yaml", environment: [:])
        #expect(slash.tracing.tracesURL == "http://collector:4318/v1/traces")
    }

    @Test("asked for by a program built without an exporter: refused, saying so, not run without spans")
    func noExporter() throws {
        var settings = TracingSettings()
        settings.endpoint = "http://collector:4318"
        #expect(throws: SpanExporter.NoSpanExporter.self) {
            _ = try SpanExporter.export(settings, with: nil, logger: .init(label: "test"))
        }
    }

    @Test("the environment turns it on (APNS_WORKER_TRACING_ENDPOINT)")
    func fromEnvironment() throws {
        let configuration = try WorkerConfiguration.parse(
            ConfigurationFixtures.minimalYAML, file: "worker.yaml",
            environment: ["APNS_WORKER_TRACING_ENDPOINT": "http://collector:4318"])
        #expect(configuration.tracing.tracesURL == "http://collector:4318/v1/traces")
    }

    @Test("a bad endpoint, ratio, parent or key is refused at its line; a password in the URL is never quoted")
    func refused() {
        #expect(
            errors(Self.yaml("endpoint: collector:4318"))
                == [
                    "worker.yaml:14: tracing.endpoint: expected an http:// or https:// URL such as http://otel-collector:4318"
                ])
        let secret = errors(Self.yaml("endpoint: http://user:hunter2@collector:4318"))
        #expect(
            secret
                == [
                    "worker.yaml:14: tracing.endpoint: a URL with a user or password is refused (it would be printed); give the collector's credentials in OTEL_EXPORTER_OTLP_HEADERS"
                ])
        #expect(!secret.joined().contains("hunter2"))
        #expect(
            errors(Self.yaml("endpoint: http://:4318")) == ["worker.yaml:14: tracing.endpoint: the URL has no host"])
        #expect(
            errors(Self.yaml("sampleRatio: 1.5"))
                == ["worker.yaml:14: tracing.sampleRatio: expected a number from 0 to 1 such as 0.1, found \"1.5\""])
        #expect(
            errors(Self.yaml("parent: child"))
                == ["worker.yaml:14: tracing.parent: expected one of producer, none, found \"child\""])
        let misspelt = errors(Self.yaml("endpiont: http://collector:4318"))
        #expect(misspelt.count == 1)
        #expect(misspelt.first?.contains("tracing.endpiont") == true)
        #expect(misspelt.first?.contains("did you mean endpoint") == true, "\(misspelt)")
    }

    @Test("check says which OTEL_* variable span export cannot honour, only when span export is on")
    func checkNamesVariable() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tracing-\(UUID()).yaml").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.yaml("endpoint: http://collector:4318").write(toFile: path, atomically: true, encoding: .utf8)
        let environment = ["OTEL_PROPAGATORS": "tracecontext,baggage"]
        let refused = await ConfigurationCheck.run(path: path, environment: environment, offline: true)
        #expect(refused.problems.count == 1)
        #expect(refused.problems.first?.hasPrefix("OTEL_PROPAGATORS=tracecontext,baggage: ") == true)
        try ConfigurationFixtures.minimalYAML.write(toFile: path, atomically: true, encoding: .utf8)
        let off = await ConfigurationCheck.run(path: path, environment: environment, offline: true)
        #expect(off.problems.isEmpty)
    }
}
