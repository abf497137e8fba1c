import Logging
import Threading
import Worker

/// The exporter's own log lines, each message at most once a minute: swift-otel's batch processor
/// warns every time it drops spans ("Spans were dropped this iteration because queue was full"),
/// many times a second when spans outpace the exporter, which would flood the worker's log. A line
/// let through after others were held back says how many (`suppressed`).
package struct ThrottledLogHandler: LogHandler {
    var base: Logger
    let gate: RateLimitedLog
    let held: Locked<[String: Int]>

    package init(base: Logger, interval: Duration = .seconds(60)) {
        self.base = base
        self.gate = RateLimitedLog(interval: interval)
        self.held = Locked([:])
    }

    package var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    package var metadata: Logger.Metadata {
        get { base.handler.metadata }
        set { base.handler.metadata = Self.redacted(newValue) }
    }

    // swift-otel sets what it says about a variable on its logger, not on the line.
    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set {
            var metadata = base.handler.metadata
            metadata[key] = newValue
            base[metadataKey: key] = Self.redacted(metadata)[key]
        }
    }

    /// swift-otel says which `OTEL_*` variable it read and its value (`environment_key`,
    /// `environment_value`, `previous_value`, `new_value`): the value of a variable that may hold a
    /// secret (`OTEL_EXPORTER_OTLP_HEADERS`: a collector's token) is never written.
    static func redacted(_ metadata: Logger.Metadata) -> Logger.Metadata {
        guard let key = metadata["environment_key"]?.description.uppercased(),
            key.contains("HEADERS") || key.contains("KEY") || key.contains("PASSWORD")
        else { return metadata }
        var metadata = metadata
        for name in ["environment_value", "previous_value", "new_value"] where metadata[name] != nil {
            metadata[name] = "<redacted>"
        }
        return metadata
    }

    package func log(event: LogEvent) {
        let message = event.message.description
        guard gate.shouldLog(message, now: .now) else {
            held.withLock { $0[message, default: 0] += 1 }
            return
        }
        var metadata = Self.redacted(event.metadata ?? [:])
        if let suppressed = held.withLock({ $0.removeValue(forKey: message) }) {
            metadata["suppressed"] = "\(suppressed)"
        }
        base.log(
            level: event.level, event.message, metadata: metadata, source: event.source, file: event.file,
            function: event.function, line: event.line)
    }
}
