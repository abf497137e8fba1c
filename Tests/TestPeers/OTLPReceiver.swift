import Foundation

/// An OTLP/HTTP trace receiver started for one test on a free loopback port: scripts/otlp-receiver.py,
/// which decodes what is posted to `/v1/traces` with OpenTelemetry's own protobuf bindings (PyPI
/// `opentelemetry-proto`, in the venv `make deps-tansu` makes), independent of the exporter under test.
package final class OTLPReceiver: Sendable {
    package let port: Int
    private let program: BackgroundProgram
    private let spansFile: String
    private let logFile: String

    /// What `tracing.endpoint` is set to: spans go to `<endpoint>/v1/traces`.
    package var endpoint: String { "http://127.0.0.1:\(port)" }

    /// One span as the receiver decoded it (ids in lower-case hex; `parentSpanID` empty for a root).
    package struct Span: Decodable, Sendable {
        package struct Link: Decodable, Sendable {
            package let traceID: String
            package let spanID: String
            enum CodingKeys: String, CodingKey {
                case traceID = "trace_id"
                case spanID = "span_id"
            }
        }
        package struct Status: Decodable, Sendable {
            /// 0 unset, 1 ok, 2 error.
            package let code: Int
            package let message: String
        }
        package let traceID: String
        package let spanID: String
        package let parentSpanID: String
        package let name: String
        /// OTLP's SpanKind: 5 is consumer.
        package let kind: Int
        package let startUnixNano: UInt64
        package let endUnixNano: UInt64
        package let attributes: [String: Value]
        package let resource: [String: Value]
        package let links: [Link]
        package let status: Status

        enum CodingKeys: String, CodingKey {
            case traceID = "trace_id"
            case spanID = "span_id"
            case parentSpanID = "parent_span_id"
            case name, kind, attributes, resource, links, status
            case startUnixNano = "start_unix_nano"
            case endUnixNano = "end_unix_nano"
        }
    }

    /// An attribute's value: OTLP's string, int, double or bool.
    package enum Value: Decodable, Sendable, Equatable, CustomStringConvertible {
        case string(String)
        case int(Int64)
        case double(Double)
        case bool(Bool)
        case other

        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(Int64.self) {
                self = .int(value)
            } else if let value = try? container.decode(Double.self) {
                self = .double(value)
            } else if let value = try? container.decode(String.self) {
                // OTLP/JSON (and the Python bindings' view of it) writes a 64-bit int as a string.
                self = .string(value)
            } else {
                self = .other
            }
        }

        package var description: String {
            switch self {
            case .string(let value): value
            case .int(let value): String(value)
            case .double(let value): String(value)
            case .bool(let value): String(value)
            case .other: "?"
            }
        }
    }

    private init(port: Int, program: BackgroundProgram, spansFile: String, logFile: String) {
        self.port = port
        self.program = program
        self.spansFile = spansFile
        self.logFile = logFile
    }

    /// Starts the receiver; ready (listening) when this returns.
    package static func start() async throws -> OTLPReceiver {
        let python = try peerPath(
            variable: "OTLP_PYTHON", installed: ".build/peers/venv/bin/python",
            what: "the peers' Python (with opentelemetry-proto)")
        let script = packageRoot.appendingPathComponent("scripts/otlp-receiver.py").path
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            let base = FileManager.default.temporaryDirectory
                .appendingPathComponent("otlp-\(getpid())-\(port)-\(UUID().uuidString.prefix(6))").path
            let spans = base + ".jsonl"
            let log = base + ".log"
            _ = FileManager.default.createFile(atPath: spans, contents: nil)
            let command =
                "exec " + [python, script, "--port", "\(port)", "--out", spans].map(shellQuoted).joined(separator: " ")
                + " </dev/null >" + shellQuoted(log) + " 2>&1"
            let program = try spawnInBackground("/bin/sh", ["-c", command])
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline, program.exitStatus() == nil {
                if (fileText(log) ?? "").contains("listening \(port)") {
                    return OTLPReceiver(port: port, program: program, spansFile: spans, logFile: log)
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            program.signal(SIGKILL)
            _ = program.waitUntilExit()
            lastError = TansuBroker.Failure(
                description: "otlp-receiver on port \(port): \((fileText(log) ?? "").suffix(800))")
            for file in [spans, log] { try? FileManager.default.removeItem(atPath: file) }
        }
        throw lastError ?? TansuBroker.Failure(description: "otlp-receiver did not start")
    }

    /// Every span received so far, in the order received (a line still being written waits).
    package func spans() throws -> [Span] {
        let decoder = JSONDecoder()
        let text = fileText(spansFile) ?? ""
        let complete = text.hasSuffix("\n") ? Substring(text) : text[..<(text.lastIndex(of: "\n") ?? text.startIndex)]
        return try complete.split(separator: "\n").map { try decoder.decode(Span.self, from: Data($0.utf8)) }
    }

    /// The spans, once at least `count` arrived (or `timeout` passed: then what there is).
    package func spans(atLeast count: Int, timeout: Duration = .seconds(30)) async throws -> [Span] {
        let deadline = ContinuousClock.now + timeout
        var received = try spans()
        while received.count < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            received = try spans()
        }
        return received
    }

    /// What the receiver said on its standard output and error (its problems with a body).
    package var log: String { fileText(logFile) ?? "" }

    package func shutdown() async {
        await program.terminate()
        for file in [spansFile, logFile] { try? FileManager.default.removeItem(atPath: file) }
    }
}
