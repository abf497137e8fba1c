import Foundation
import TestPeers
import Testing

/// `apns-worker dev` as a user meets it: start it, follow the instructions it prints (its own kcat
/// and apns-worker command lines, run by a shell), see the result events, stop it with SIGTERM.
/// Programs are started with posix_spawn (`spawnInBackground`, `spawnAndWait`), not Foundation's
/// `Process`, whose `run()` crashes now and then on Linux.
@Suite("apns-worker dev (the binary)", .timeLimit(.minutes(3)))
struct DevCommandTests {
    static func shell(_ command: String) throws -> (status: Int32, output: String) {
        let program = try spawnAndWait("/bin/sh", ["-c", command], timeout: 60)
        return (program.status, program.stdout)
    }

    /// The lines of `text` between the line containing `start` and the one containing `end`.
    static func section(_ text: String, from start: String, to end: String) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.firstIndex(where: { $0.contains(start) }),
            let last = lines[first...].firstIndex(where: { $0.contains(end) })
        else { return "" }
        return lines[(first + 1)..<last].joined(separator: "\n")
    }

    @Test(
        "the printed commands send an event and a Live Activity broadcast, show both delivered results, list the channel; SIGTERM exits 0"
    )
    func followTheInstructions() async throws {
        let dev = try spawnInBackground(WorkerCommand.binary.path, ["dev"])
        let deadline = ContinuousClock.now + .seconds(60)
        while !dev.stdout.contains("Ctrl-C stops everything"), ContinuousClock.now < deadline, dev.exitStatus() == nil {
            try await Task.sleep(for: .milliseconds(100))
        }
        let printed = dev.stdout
        #expect(printed.contains("Kafka bootstrap"), "dev printed: \(printed)")
        let send = Self.section(printed, from: "Send an event:", to: "Broadcast a Live Activity")
        let broadcast = Self.section(printed, from: "Broadcast a Live Activity", to: "Watch the results")
        let watching = Self.section(printed, from: "Watch the results", to: "List the app's channels")
            .split(separator: "\n").map(String.init)
        let watch = watching.first ?? ""
        let watchDeadLetters = watching.dropFirst().first ?? ""
        let list = Self.section(printed, from: "List the app's channels", to: "Replay dead letters")
        try #require(
            send.contains("kcat") && broadcast.contains("kcat") && watch.contains("kcat")
                && list.contains("apns-worker channels list"), "not every command in: \(printed)")
        let channel = try #require(
            printed.split(separator: "\n").first { $0.contains("broadcast channel") }?.split(separator: " ").dropFirst(
                2
            )
            .first.map(String.init))

        // The user's commands, as printed (a shell joins the continued lines).
        #expect(try Self.shell(send).status == 0)
        #expect(try Self.shell(broadcast).status == 0)
        // Watching, bounded: two results, then exit (the printed command follows forever).
        let twice = watch + " -o beginning -c 2 -e"
        var results: [Substring] = []
        while results.count < 2, ContinuousClock.now < deadline + .seconds(60) {
            results = try Self.shell(twice).output.split(separator: "\n")
            if results.count < 2 { try await Task.sleep(for: .milliseconds(500)) }
        }
        let event = results.first { $0.hasPrefix("e1 ") } ?? ""
        #expect(event.contains(#""outcome":"delivered""#), "results: \(results)")
        let broadcastResult = results.first { $0.hasPrefix("b1 ") } ?? ""
        #expect(broadcastResult.contains(#""outcome":"delivered""#), "results: \(results)")
        #expect(broadcastResult.contains(#""apnsRequestId":""#), "results: \(results)")
        // A dead letter's headers read back with the printed command, each value whole: its detail
        // has commas, which `-f '%h'` (printed before) used to join the headers with.
        let bootstrap =
            printed.split(separator: "\n").first { $0.contains("Kafka bootstrap") }?.split(separator: " ")
            .last.map(String.init) ?? ""
        #expect(try Self.shell("echo '{\"id\":\"bad\"' | kcat -b \(bootstrap) -P -t notifications").status == 0)
        var letter: [String: Any] = [:]
        while letter.isEmpty, ContinuousClock.now < deadline + .seconds(60) {
            let line = try Self.shell(watchDeadLetters + " -o beginning -c 1 -e").output.split(separator: "\n").first
            letter = line.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } ?? [:]
            if letter.isEmpty { try await Task.sleep(for: .milliseconds(500)) }
        }
        let headers = letter["headers"] as? [String] ?? []
        let detail = zip(headers, headers.dropFirst()).first { $0.0 == "dlq-detail" }?.1 ?? ""
        #expect(detail.contains(","), "dlq-detail whole, commas and all: \(letter)")
        #expect(zip(headers, headers.dropFirst()).contains { $0.0 == "dlq-reason" && $0.1 == "malformed-json" })
        // The channel the worker broadcast to is the app's, as channel management lists it: the
        // printed command runs as printed, naming the running binary by its absolute path (it is not
        // on PATH).
        let program = list.split(separator: " ", omittingEmptySubsequences: true).first.map(String.init) ?? ""
        #expect(program.hasPrefix("/") && FileManager.default.isExecutableFile(atPath: program), "\(list)")
        let listed = try Self.shell(list)
        #expect(listed.status == 0 && listed.output.contains(channel), "\(listed.output)")

        dev.signal(SIGTERM)
        let stopBy = ContinuousClock.now + .seconds(60)
        while dev.exitStatus() == nil, ContinuousClock.now < stopBy { try await Task.sleep(for: .milliseconds(100)) }
        #expect(dev.exitStatus() == 0, "dev did not stop with 0 on SIGTERM")
        // Before: nothing at all when it stopped, and the endpoint's line at warning before the banner.
        #expect(dev.stdout.contains("apns-worker dev: stopped"), "\(dev.stdout)")
        #expect(!dev.stdout.contains("operations endpoint listening"), "the banner says it")
    }

    // MARK: Making it misbehave

    /// `dev` with `arguments`, once it printed its instructions, and its Kafka bootstrap address.
    static func startDev(_ arguments: [String]) async throws -> (dev: BackgroundProgram, bootstrap: String) {
        // Its standard error kept, so that a crash's backtrace is in the failure (`stop`).
        let stderrFile = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-worker-dev-\(UUID().uuidString.prefix(8)).stderr").path
        let dev = try spawnInBackground(WorkerCommand.binary.path, ["dev"] + arguments, stderrFile: stderrFile)
        stderrFiles.withLock { $0[dev.processIdentifier] = stderrFile }
        let deadline = ContinuousClock.now + .seconds(60)
        while !dev.stdout.contains("Ctrl-C stops everything"), ContinuousClock.now < deadline, dev.exitStatus() == nil {
            try await Task.sleep(for: .milliseconds(100))
        }
        let line = dev.stdout.split(separator: "\n").first { $0.contains("Kafka bootstrap") } ?? ""
        let bootstrap = try #require(line.split(separator: " ").last.map(String.init), "dev printed: \(dev.stdout)")
        return (dev, bootstrap)
    }

    /// An alert event for `token`, as the event format has it.
    static func event(_ id: String, token: String) -> String {
        #"{"id":"\#(id)","deviceToken":"\#(token)","topic":"com.example.demo","pushType":"alert","payload":{"aps":{"alert":"Hi"}}}"#
    }

    /// Produces `events` (one JSON object a line) to dev's input topic with kcat.
    static func produce(_ events: [String], bootstrap: String) throws {
        let file = try WorkerCommand().temporaryFile("events.ndjson", events.joined(separator: "\n") + "\n")
        let sent = try shell("kcat -b \(bootstrap) -P -t notifications -l \(file)")
        #expect(sent.status == 0, "kcat: \(sent.output)")
    }

    /// The result events of `ids` from the results topic, by event id (waits up to a minute for all).
    static func results(_ ids: Set<String>, bootstrap: String) async throws -> [String: String] {
        var found: [String: String] = [:]
        let deadline = ContinuousClock.now + .seconds(60)
        while Set(found.keys) != ids, ContinuousClock.now < deadline {
            let read = try shell("kcat -b \(bootstrap) -C -t notification-results -o beginning -e -q -f '%k %s\\n'")
            for line in read.output.split(separator: "\n") {
                let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
                if parts.count == 2, ids.contains(parts[0]) { found[parts[0]] = parts[1] }
            }
            if Set(found.keys) != ids { try await Task.sleep(for: .milliseconds(500)) }
        }
        return found
    }

    /// Stops `dev` with SIGTERM and expects it to exit 0.
    static func stop(_ dev: BackgroundProgram) async throws {
        dev.signal(SIGTERM)
        let stopBy = ContinuousClock.now + .seconds(60)
        while dev.exitStatus() == nil, ContinuousClock.now < stopBy { try await Task.sleep(for: .milliseconds(100)) }
        let stderrFile = stderrFiles.withLock { $0.removeValue(forKey: dev.processIdentifier) }
        let stderr = stderrFile.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? ""
        #expect(
            dev.exitStatus() == 0,
            "dev did not stop with 0 on SIGTERM; the end of its standard error: \(stderr.suffix(6000))")
        if let stderrFile { try? FileManager.default.removeItem(atPath: stderrFile) }
    }

    /// Where each `startDev` child's standard error goes, by its process id.
    static let stderrFiles = StderrFiles()

    /// Behind an `NSLock` (ThreadSanitizer sees it; `Mutex` on Linux it does not).
    final class StderrFiles: @unchecked Sendable {
        private let lock = NSLock()
        private var files: [pid_t: String] = [:]
        func withLock<T>(_ body: (inout [pid_t: String]) -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body(&files)
        }
    }

    static let registered = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0"
    static let gone = "7a1e6b0c3d2f4e5a69788796a5b4c3d2e1f00112233445566778899aabbccdde"

    @Test(
        "a token given to --unregistered ends unregistered (410, with APNs' timestamp), a 2-byte token ends rejected with BadDeviceToken, a 32-byte one delivered"
    )
    func unregisteredAndMalformedTokens() async throws {
        let (dev, bootstrap) = try await Self.startDev(["--unregistered", Self.gone])
        #expect(dev.stdout.contains("410 Unregistered to 1 token"), "\(dev.stdout)")
        try Self.produce(
            [
                Self.event("gone", token: Self.gone), Self.event("short", token: "abcd"),
                Self.event("fine", token: Self.registered),
            ], bootstrap: bootstrap)
        let results = try await Self.results(["gone", "short", "fine"], bootstrap: bootstrap)
        let gone = results["gone"] ?? ""
        #expect(gone.contains(#""outcome":"unregistered""#) && gone.contains(#""reason":"Unregistered""#), "\(gone)")
        #expect(gone.contains(#""status":410"#) && gone.contains(#""apnsTimestamp":"#), "\(gone)")
        let short = results["short"] ?? ""
        #expect(short.contains(#""outcome":"rejected""#) && short.contains(#""reason":"BadDeviceToken""#), "\(short)")
        #expect(short.contains(#""status":400"#), "\(short)")
        #expect(results["fine"]?.contains(#""outcome":"delivered""#) == true, "\(results)")
        try await Self.stop(dev)
    }

    @Test("--unregistered-fraction 1: every token ends unregistered")
    func unregisteredFraction() async throws {
        let (dev, bootstrap) = try await Self.startDev(["--unregistered-fraction", "1"])
        try Self.produce([Self.event("u1", token: Self.registered)], bootstrap: bootstrap)
        let results = try await Self.results(["u1"], bootstrap: bootstrap)
        #expect(results["u1"]?.contains(#""outcome":"unregistered""#) == true, "\(results)")
        try await Self.stop(dev)
    }

    @Test(
        "--throttle-fraction 1: every push gets 429 and is retried until the retry policy's 6 attempts, then ends failed with TooManyRequests and is dead-lettered"
    )
    func throttled() async throws {
        let (dev, bootstrap) = try await Self.startDev(["--throttle-fraction", "1"])
        #expect(dev.stdout.contains("429 TooManyRequests to 100% of requests"), "\(dev.stdout)")
        try Self.produce([Self.event("t1", token: Self.registered)], bootstrap: bootstrap)
        let result = try await Self.results(["t1"], bootstrap: bootstrap)["t1"] ?? ""
        #expect(result.contains(#""outcome":"failed""#) && result.contains(#""reason":"TooManyRequests""#), "\(result)")
        #expect(result.contains(#""status":429"#) && result.contains(#""attempts":6"#), "\(result)")
        // It was dead-lettered, as the printed replay command (run as printed) tells.
        let replay = Self.section(dev.stdout, from: "Replay dead letters", to: "Ctrl-C stops everything")
        let replayed = try Self.shell(replay)
        #expect(replayed.status == 0 && replayed.output.contains("retries-exhausted"), "\(replay): \(replayed.output)")
        try await Self.stop(dev)
    }

    @Test("--fault-fraction 1: every push gets 500 or 503 and is retried, then ends failed with that reason")
    func serverErrors() async throws {
        let (dev, bootstrap) = try await Self.startDev(["--fault-fraction", "1"])
        try Self.produce([Self.event("f1", token: Self.registered)], bootstrap: bootstrap)
        let result = try await Self.results(["f1"], bootstrap: bootstrap)["f1"] ?? ""
        #expect(result.contains(#""outcome":"failed""#) && result.contains(#""attempts":6"#), "\(result)")
        #expect(
            result.contains(#""reason":"InternalServerError""#) || result.contains(#""reason":"ServiceUnavailable""#),
            "\(result)")
        try await Self.stop(dev)
    }

    @Test("dev logs nothing at info when its configuration says warning; with --log-level info it does")
    func logLevel() async throws {
        for (arguments, level) in [([], "warning"), (["--log-level", "info"], "info")] {
            let (dev, bootstrap) = try await Self.startDev(arguments)
            let configurationLine = dev.stdout.split(separator: "\n").first { $0.contains("configuration  ") } ?? ""
            let file = try #require(configurationLine.split(separator: " ").last.map(String.init))
            let written = try String(contentsOfFile: file, encoding: .utf8)
            #expect(written.contains("level: \(level)"), "\(written)")
            try Self.produce([Self.event("l1", token: Self.registered)], bootstrap: bootstrap)
            _ = try await Self.results(["l1"], bootstrap: bootstrap)
            try await Self.stop(dev)
            let infoLines = dev.stdout.split(separator: "\n").filter { $0.contains(" info ") }
            if level == "warning" {
                #expect(infoLines.isEmpty, "info lines at warning: \(infoLines)")
            } else {
                #expect(!infoLines.isEmpty, "no info lines at info: \(dev.stdout)")
            }
        }
    }

    @Test("shares outside 0...1, or adding up to more than 1, are usage errors (exit 2) before anything starts")
    func badShares() throws {
        for arguments in [
            ["--throttle-fraction", "2"], ["--throttle-fraction", "0.6", "--fault-fraction", "0.6"],
            ["--unregistered", "xyz"], ["--fault", "NoSuchReason=0.1"], ["--log-level", "loud"],
        ] {
            let run = try WorkerCommand().run(["dev"] + arguments)
            #expect(run.status == 2, "\(arguments): \(run.stdout) \(run.stderr)")
            #expect(!run.stdout.contains("Kafka bootstrap"), "\(arguments) started: \(run.stdout)")
        }
    }
}
