import Foundation
import JSONSchema
import TestPeers
import Testing
import Worker

/// Python's `jsonschema` (Debian's python3-jsonschema, installed by `make deps-test`) as an
/// independent oracle: the same damaged events, the same schema file, the same verdicts.
@Suite("notification schema: verdicts agree with Python's jsonschema")
struct PythonOracleTests {
    static let python = "/usr/bin/python3"

    static let script = """
        import json, sys
        import jsonschema
        schema = json.load(open(sys.argv[1], encoding="utf-8"))
        validator = jsonschema.Draft7Validator(schema)
        for line in open(sys.argv[2], encoding="utf-8"):
            print("valid" if validator.is_valid(json.loads(line)) else "invalid")
        """

    @Test("2,000 damaged events: every verdict matches")
    func verdicts() async throws {
        var random = NotificationEventRobustnessTests.SplitMix64(state: 7)
        let original = EventFixtures.event([:])
        var events: [JSONValue] = []
        var lines: [String] = []
        while events.count < 2_000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let i = Int.random(in: 0..<bytes.count, using: &random)
                // Printable ASCII only: both parsers then read the same document.
                let byte = UInt8.random(in: 0x20...0x7E, using: &random)
                if Bool.random(using: &random) { bytes[i] = byte } else { bytes.insert(byte, at: i) }
            }
            guard let value = try? JSONParser.parse(bytes) else { continue }
            events.append(value)
            lines.append(value.jsonText)
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("oracle-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let eventsFile = dir.appendingPathComponent("events.ndjson")
        try (lines.joined(separator: "\n") + "\n").write(to: eventsFile, atomically: true, encoding: .utf8)

        let python = try await spawnAndAwait(
            Self.python,
            ["-c", Self.script, EventFixtures.schemaFile("notification-event.schema.json").path, eventsFile.path],
            timeout: 300)
        try #require(python.status == 0, "python3 with jsonschema is needed: make deps-test (\(python.stderr))")
        let verdicts = python.stdout.split(separator: "\n").map { $0 == "valid" }
        try #require(verdicts.count == events.count)

        let schema = EventSchemas.notificationEvent
        var disagreements = 0
        var valid = 0
        for (event, python) in zip(events, verdicts) {
            let ours = schema.isValid(event)
            if ours { valid += 1 }
            if ours != python {
                disagreements += 1
                if disagreements <= 5 {
                    Issue.record("ours: \(ours), Python: \(python): \(event.jsonText)")
                }
            }
        }
        #expect(disagreements == 0)
        // Both kinds of verdict were exercised.
        #expect(valid > 50 && valid < events.count - 50, "valid: \(valid) of \(events.count)")
    }
}
