import Logging
import Threading
import Worker

/// The exporter's own log lines, each message at most once a minute: swift-otel's batch processor
/// warns every time it drops spans ("Spans were dropped this iteration because queue was full"),
/// many times a second when spans outpace the exporter, which would flood the worker's log. A line
/// let through after others were held back says how many (`suppressed`).
struct ThrottledLogHandler: LogHandler {
    var base: Logger
    let gate: RateLimitedLog
    let held: Locked<[String: Int]>

    init(base: Logger, interval: Duration = .seconds(60)) {
        self.base = base
        self.gate = RateLimitedLog(interval: interval)
        self.held = Locked([:])
    }

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { base.handler.metadata }
        set { base.handler.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        let message = event.message.description
        guard gate.shouldLog(message, now: .now) else {
            held.withLock { $0[message, default: 0] += 1 }
            return
        }
        var metadata = event.metadata ?? [:]
        if let suppressed = held.withLock({ $0.removeValue(forKey: message) }) {
            metadata["suppressed"] = "\(suppressed)"
        }
        base.log(
            level: event.level, event.message, metadata: metadata, source: event.source, file: event.file,
            function: event.function, line: event.line)
    }
}
