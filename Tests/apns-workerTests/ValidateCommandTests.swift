import Foundation
import Kafka
import Testing

/// Runs the built `apns-worker` binary as a user would: exit codes, output format, stdin.
@Suite("apns-worker validate (the binary)")
struct ValidateCommandTests {
    static let valid =
        #"{"id":"e1","deviceToken":"abcd","topic":"com.example.app","pushType":"alert","payload":{"aps":{"alert":"hi"}}}"#
    static let badPriority =
        #"{"id":"e2","deviceToken":"abcd","topic":"com.example.app","pushType":"background","priority":10,"payload":{"aps":{"content-available":1}}}"#

    @Test("valid events exit 0 and print nothing on stdout")
    func valid() throws {
        let file = try WorkerCommand().temporaryFile("ok.json", Self.valid)
        let r = try WorkerCommand().run(["validate", file])
        #expect(r.status == 0)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("1 valid, 0 invalid"))
    }

    @Test("--version prints the release CHANGELOG.md names first, then the librdkafka it runs with")
    func version() throws {
        let r = try WorkerCommand().run(["--version"])
        #expect(r.status == 0)
        let changelog = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../CHANGELOG.md"), encoding: .utf8)
        let release = changelog.split(separator: "\n").first {
            $0.hasPrefix("## [") && !$0.hasPrefix("## [Unreleased]")
        }
        let named = release.map { $0.dropFirst(4).prefix { $0 != "]" } }
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(
            lines.first.map(String.init) == named.map(String.init),
            "CHANGELOG.md's newest release: \(release ?? "none")")
        // The binary, run as a child process, loads the librdkafka this test process loads (the one
        // the build found: the run path `make` gives every binary), not another on the system.
        #expect(lines.dropFirst().first.map(String.init) == "librdkafka \(KafkaLibrary.version)")
        #expect(lines.count == 3 && lines.last == "")
        print("apns-worker --version: \(r.stdout.split(separator: "\n").joined(separator: ", "))")
    }

    // Before: "unexpected character '{' after the JSON value" with no hint, and "cannot read" with
    // no reason.
    @Test("NDJSON in a .json file says to name it .ndjson; a file that is not there says why it cannot be read")
    func ndjsonHintAndMissingFile() throws {
        let helper = WorkerCommand()
        let file = try helper.temporaryFile("two.json", Self.valid + "\n" + Self.valid + "\n")
        let r = try helper.run(["validate", file])
        #expect(r.status == 1)
        #expect(
            r.stdout.contains(
                "\(file): this is one JSON value per line (NDJSON): name the file .ndjson or .jsonl, or pass it on standard input (-), to validate each line"
            ), "\(r.stdout)")
        let missing = try helper.run(["validate", file + ".missing"])
        #expect(missing.status == 2)
        #expect(
            missing.stderr.contains("cannot read '\(file).missing': No such file or directory"), "\(missing.stderr)")
    }

    @Test("an invalid event exits 1 with FILE: pointer: message")
    func invalid() throws {
        let file = try WorkerCommand().temporaryFile("bad.json", Self.badPriority)
        let r = try WorkerCommand().run(["validate", file])
        #expect(r.status == 1)
        #expect(r.stdout == "\(file): /priority: background notifications must not use priority 10 [enum]\n")
    }

    @Test("NDJSON on stdin: FILE:LINE for each problem, blank lines skipped")
    func ndjsonStdin() throws {
        let r = try WorkerCommand().run(["validate", "-"], stdin: Self.valid + "\n\n" + Self.badPriority + "\n{oops\n")
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
        let file = try WorkerCommand().temporaryFile(
            "events.ndjson", [start, accessory, bareAccessory].joined(separator: "\n") + "\n")
        let r = try WorkerCommand().run(["validate", file])
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
        let file = try WorkerCommand().temporaryFile("events.ndjson", Self.valid + "\n" + Self.valid + "\n")
        let r = try WorkerCommand().run(["validate", file])
        #expect(r.status == 0)
        #expect(r.stderr.contains("2 events: 2 valid, 0 invalid"))
    }

    @Test("--schema validates against any draft-07 schema")
    func customSchema() throws {
        let schema = try WorkerCommand().temporaryFile(
            "s.json", #"{"type": "object", "required": ["user"], "properties": {"user": {"type": "string"}}}"#)
        let event = try WorkerCommand().temporaryFile("e.json", #"{"user": 5}"#)
        let r = try WorkerCommand().run(["validate", "--schema", schema, event])
        #expect(r.status == 1)
        #expect(r.stdout == "\(event): /user: expected string, found integer [type]\n")
        let extended = try WorkerCommand().temporaryFile(
            "ext.json",
            #"{"allOf": [{"$ref": "urn:apns-worker:schema:notification-event"}, {"required": ["metadata"]}]}"#)
        let ok = try WorkerCommand().temporaryFile("ok.json", Self.valid)
        let r2 = try WorkerCommand().run(["validate", "--schema", extended, ok])
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
        let r = try WorkerCommand().run(arguments)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(!r.stderr.isEmpty)
    }

    @Test("a schema with a $ref cycle is a schema error (exit 2)")
    func cyclicSchema() throws {
        let schema = try WorkerCommand().temporaryFile("cycle.json", ##"{"$ref": "#"}"##)
        let event = try WorkerCommand().temporaryFile("e.json", "{}")
        let r = try WorkerCommand().run(["validate", "--schema", schema, event])
        #expect(r.status == 2)
        #expect(r.stderr.contains("reference cycle"))
    }
}
