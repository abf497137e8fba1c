import Foundation
import Logging
import NIOConcurrencyHelpers

/// One JSON object per line: `timestamp` (ISO 8601, UTC, milliseconds), `level`, `label`,
/// `source` (the module that logged: `Worker`, `Kafka`, `APNs`, …), `message`, `metadata` (and
/// `error` when the event carries one).
///
/// No redaction here: the pipeline passes redacted device tokens and never a JWT; this handler's
/// job is to escape every string correctly so a log line always parses.
package struct JSONLogHandler: LogHandler {
    package var logLevel: Logger.Level = .info
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let sink: JSONLogSink

    package init(label: String, sink: JSONLogSink = .standardOutput, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.sink = sink
        self.metadataProvider = metadataProvider
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        var line = "{\"timestamp\":\"\(Self.timestamp(Date()))\",\"level\":\"\(event.level.rawValue)\""
        line += ",\"label\":\(JSONText.quoted(label)),\"source\":\(JSONText.quoted(event.source))"
        line += ",\"message\":\(JSONText.quoted(event.message.description))"
        if let error = event.error { line += ",\"error\":\(JSONText.quoted(String(describing: error)))" }
        if !merged.isEmpty { line += ",\"metadata\":\(Self.json(.dictionary(merged)))" }
        line += "}\n"
        sink.write(line)
    }

    static func json(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let string): JSONText.quoted(string)
        case .stringConvertible(let convertible): JSONText.quoted(convertible.description)
        case .array(let values): "[" + values.map(json).joined(separator: ",") + "]"
        case .dictionary(let dictionary):
            "{"
                + dictionary.sorted { $0.key < $1.key }.map { "\(JSONText.quoted($0.key)):\(json($0.value))" }
                .joined(separator: ",") + "}"
        }
    }

    /// `2026-11-22T03:50:07.123Z`, by hand: Foundation's formatters are neither cheap nor Sendable.
    static func timestamp(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        let milliseconds = Int((date.timeIntervalSince1970 - Double(time)) * 1000)
        var parts = tm()
        gmtime_r(&time, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(milliseconds), 3))Z"
    }
}

/// Where JSON log lines go: standard output in production, a buffer in tests.
package struct JSONLogSink: Sendable {
    private let writeLine: @Sendable (String) -> Void

    package init(_ writeLine: @escaping @Sendable (String) -> Void) {
        self.writeLine = writeLine
    }

    func write(_ line: String) { writeLine(line) }

    /// Whole lines under one lock, so that lines from several threads never interleave.
    package static let standardOutput: JSONLogSink = {
        let lock = NIOLock()
        return JSONLogSink { line in
            lock.withLock {
                var line = line
                line.withUTF8 { bytes in
                    var offset = 0
                    while offset < bytes.count {
                        let written = Foundation.write(1, bytes.baseAddress! + offset, bytes.count - offset)
                        if written < 0, errno == EINTR { continue }
                        guard written > 0 else { return }  // stdout gone: nothing better to do
                        offset += written
                    }
                }
            }
        }
    }()
}
