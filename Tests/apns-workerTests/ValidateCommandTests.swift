import Foundation
import TestPeers
import Testing

/// Runs the built `apns-worker` binary as a user would: exit codes, output format, stdin.
@Suite("apns-worker validate (the binary)")
struct ValidateCommandTests {
    static let binary: URL = {
        // The test bundle sits in the same build folder as the executable.
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("apns-worker")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/apns-worker")
    }()

    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// The binary with `arguments` (and `stdin`), to its end; spawned without Foundation's
    /// `Process`, whose `run()` crashes now and then on Linux (see `spawnAndWait`).
    func run(_ arguments: [String], stdin: String? = nil) throws -> Run {
        let program = try spawnAndWait(Self.binary.path, arguments, stdin: Array((stdin ?? "").utf8), timeout: 120)
        return Run(status: program.status, stdout: program.stdout, stderr: program.stderr)
    }

    func temporaryFile(_ name: String, _ contents: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "apns-worker-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent(name)
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    static let valid =
        #"{"id":"e1","deviceToken":"abcd","topic":"com.example.app","pushType":"alert","payload":{"aps":{"alert":"hi"}}}"#
    static let badPriority =
        #"{"id":"e2","deviceToken":"abcd","topic":"com.example.app","pushType":"background","priority":10,"payload":{"aps":{"content-available":1}}}"#

    @Test("valid events exit 0 and print nothing on stdout")
    func valid() throws {
        let file = try temporaryFile("ok.json", Self.valid)
        let r = try run(["validate", file])
        #expect(r.status == 0)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("1 valid, 0 invalid"))
    }

    @Test("--version prints the release CHANGELOG.md names first")
    func version() throws {
        let r = try run(["--version"])
        #expect(r.status == 0)
        let changelog = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../CHANGELOG.md"), encoding: .utf8)
        let release = changelog.split(separator: "\n").first {
            $0.hasPrefix("## [") && !$0.hasPrefix("## [Unreleased]")
        }
        let named = release.map { $0.dropFirst(4).prefix { $0 != "]" } }
        #expect(r.stdout == "\(named.map(String.init) ?? "?")\n", "CHANGELOG.md's newest release: \(release ?? "none")")
    }

    @Test("an invalid event exits 1 with FILE: pointer: message")
    func invalid() throws {
        let file = try temporaryFile("bad.json", Self.badPriority)
        let r = try run(["validate", file])
        #expect(r.status == 1)
        #expect(r.stdout == "\(file): /priority: background notifications must not use priority 10 [enum]\n")
    }

    @Test("NDJSON on stdin: FILE:LINE for each problem, blank lines skipped")
    func ndjsonStdin() throws {
        let r = try run(["validate", "-"], stdin: Self.valid + "\n\n" + Self.badPriority + "\n{oops\n")
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first == "<stdin>:3: /priority: background notifications must not use priority 10 [enum]")
        #expect(lines.last?.hasPrefix("<stdin>:4: (root): invalid JSON at line 1, column 2") == true)
        #expect(r.stderr.contains("3 events: 1 valid, 2 invalid"))
    }

    @Test(
        "Live Activity start without attributes-type refused, accessory with its suffix accepted; each problem located with its keyword"
    )
    func liveActivityAndAccessory() throws {
        let start =
            #"{"id":"la-1","deviceToken":"740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad","topic":"com.example.app.push-type.liveactivity","pushType":"liveactivity","priority":10,"payload":{"aps":{"timestamp":1767225600,"event":"start","attributes":{"match":"m-17"},"content-state":{"score":"0-0"},"alert":{"title":"Kick-off"}}}}"#
        let accessory =
            #"{"id":"acc-1","deviceToken":"740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad","topic":"com.example.app.push-type.accessory","pushType":"accessory","payload":{"aps":{"alert":"Battery low"}}}"#
        let bareAccessory = accessory.replacingOccurrences(of: ".push-type.accessory", with: "")
        let file = try temporaryFile("events.ndjson", [start, accessory, bareAccessory].joined(separator: "\n") + "\n")
        let r = try run(["validate", file])
        #expect(r.status == 1)
        #expect(
            r.stdout.split(separator: "\n") == [
                "\(file):1: /payload/aps: required property 'attributes-type' is missing [required]",
                "\(file):3: /topic: push type 'accessory' needs the topic <bundle id>.push-type.accessory [pattern]",
            ], "\(r.stdout)")
        #expect(r.stderr.contains("3 events: 1 valid, 2 invalid"))
    }

    @Test(".ndjson files are read line by line")
    func ndjsonFile() throws {
        let file = try temporaryFile("events.ndjson", Self.valid + "\n" + Self.valid + "\n")
        let r = try run(["validate", file])
        #expect(r.status == 0)
        #expect(r.stderr.contains("2 events: 2 valid, 0 invalid"))
    }

    @Test("--schema validates against any draft-07 schema")
    func customSchema() throws {
        let schema = try temporaryFile(
            "s.json", #"{"type": "object", "required": ["user"], "properties": {"user": {"type": "string"}}}"#)
        let event = try temporaryFile("e.json", #"{"user": 5}"#)
        let r = try run(["validate", "--schema", schema, event])
        #expect(r.status == 1)
        #expect(r.stdout == "\(event): /user: expected string, found integer [type]\n")
        let extended = try temporaryFile(
            "ext.json",
            #"{"allOf": [{"$ref": "urn:apns-worker:schema:notification-event"}, {"required": ["metadata"]}]}"#)
        let ok = try temporaryFile("ok.json", Self.valid)
        let r2 = try run(["validate", "--schema", extended, ok])
        #expect(r2.status == 1)
        #expect(r2.stdout == "\(ok): (root): required property 'metadata' is missing [required]\n")
    }

    @Test(
        "usage, file and schema errors exit 2",
        arguments: [
            ["validate"],
            ["validate", "--bogus", "x"],
            ["validate", "/nonexistent/event.json"],
            ["validate", "--schema", "/nonexistent/schema.json", "x"],
        ])
    func usage(arguments: [String]) throws {
        let r = try run(arguments)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(!r.stderr.isEmpty)
    }

    @Test("a schema with a $ref cycle is a schema error (exit 2)")
    func cyclicSchema() throws {
        let schema = try temporaryFile("cycle.json", ##"{"$ref": "#"}"##)
        let event = try temporaryFile("e.json", "{}")
        let r = try run(["validate", "--schema", schema, event])
        #expect(r.status == 2)
        #expect(r.stderr.contains("reference cycle"))
    }
}
