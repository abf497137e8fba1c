import Foundation
import Logging
import Threading

/// What a logger was told, kept for a test to read: a `Logger` whose lines land here instead of
/// standard error.
public final class CapturedLog: Sendable {
    public typealias Entry = (level: Logger.Level, message: String, metadata: Logger.Metadata)

    private let entries = Locked<[Entry]>([])

    public init() {}

    /// Every entry so far, oldest first.
    public var all: [Entry] { entries.withLock { $0 } }

    /// Every entry as `level: message`.
    public var lines: [String] { all.map { "\($0.level): \($0.message)" } }

    /// A logger that logs here, from `level` up.
    public func logger(level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: "captured") { _ in Handler(log: self, logLevel: level) }
        logger.logLevel = level
        return logger
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level

        init(log: CapturedLog, logLevel: Logger.Level) {
            self.log = log
            self.logLevel = logLevel
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            log.entries.withLock { $0.append((event.level, event.message.description, merged)) }
        }
    }
}
