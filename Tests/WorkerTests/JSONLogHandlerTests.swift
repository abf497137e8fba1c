import Foundation
import Logging
import Synchronization
import Testing

@testable import Worker

@Suite("JSON log handler")
struct JSONLogHandlerTests {
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        var sink: JSONLogSink { JSONLogSink { line in self.lines.withLock { $0.append(line) } } }
        var all: [String] { lines.withLock { $0 } }
    }

    @Test("one JSON object per line, every string escaped")
    func output() throws {
        let lines = Lines()
        var handler = JSONLogHandler(label: "apns-worker.\"pipeline\"", sink: lines.sink)
        handler.logLevel = .debug
        handler[metadataKey: "worker"] = "w-1"
        let logger = Logger(label: "ignored") { _ in handler }
        let awkward = "quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} unicode é 🚀"
        logger.info(
            "delivered \(awkward)",
            metadata: [
                "token": "abcd…ef12", "attempts": .stringConvertible(3), "nested": ["a": ["1", "2"]], awkward: "key",
            ])
        logger.trace("below the level")
        logger.error("failed", error: CocoaError(.fileNoSuchFile))

        #expect(lines.all.count == 2)
        for line in lines.all {
            #expect(line.hasSuffix("}\n"))
            #expect(line.dropLast().contains("\n") == false)
        }
        let object = try #require(
            JSONSerialization.jsonObject(with: Data(lines.all[0].utf8)) as? [String: Any])
        #expect(object["level"] as? String == "info")
        #expect(object["label"] as? String == "apns-worker.\"pipeline\"")
        #expect(object["source"] as? String == "WorkerTests", "the module that logged")
        #expect(object["message"] as? String == "delivered \(awkward)")
        let metadata = try #require(object["metadata"] as? [String: Any])
        #expect(metadata["worker"] as? String == "w-1")
        #expect(metadata["token"] as? String == "abcd…ef12")
        #expect(metadata["attempts"] as? String == "3")
        #expect((metadata["nested"] as? [String: [String]])?["a"] == ["1", "2"])
        #expect(metadata[awkward] as? String == "key")
        let timestamp = try #require(object["timestamp"] as? String)
        #expect(timestamp.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)

        let error = try #require(JSONSerialization.jsonObject(with: Data(lines.all[1].utf8)) as? [String: Any])
        #expect(error["level"] as? String == "error")
        #expect(error["error"] is String)
    }

    @Test("the settings choose the handler and its level")
    func settings() {
        var settings = LoggingSettings()
        settings.level = .warning
        #expect(settings.makeLogHandler(label: "x") is JSONLogHandler)
        #expect(settings.makeLogHandler(label: "x").logLevel == .warning)
        settings.format = .text
        #expect(settings.makeLogHandler(label: "x") is StreamLogHandler)
    }

    @Test("timestamps are UTC with milliseconds")
    func timestamp() {
        #expect(JSONLogHandler.timestamp(Date(timeIntervalSince1970: 1_795_000_000.5)) == "2026-11-18T11:06:40.500Z")
    }
}
