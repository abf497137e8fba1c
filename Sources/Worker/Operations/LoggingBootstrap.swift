import Threading
import Logging

extension LoggingSettings {
    /// A handler factory for `LoggingSystem.bootstrap`: JSON lines or swift-log's text stream, at
    /// `level`.
    package func makeLogHandler(label: String, sink: JSONLogSink = .standardOutput) -> any LogHandler {
        switch format {
        case .json:
            var handler = JSONLogHandler(label: label, sink: sink)
            handler.logLevel = level
            return handler
        case .text:
            var handler = StreamLogHandler.standardOutput(label: label)
            handler.logLevel = level
            return handler
        }
    }

    private static let bootstrapped = Locked(false)

    /// Installs the handler process-wide, once (`LoggingSystem.bootstrap` traps on a second call).
    /// Returns `false` when logging was already bootstrapped.
    @discardableResult
    package func bootstrapLoggingSystem() -> Bool {
        let first = Self.bootstrapped.withLock { done in
            defer { done = true }
            return !done
        }
        if first {
            let settings = self
            LoggingSystem.bootstrap { label in settings.makeLogHandler(label: label) }
        }
        return first
    }
}
