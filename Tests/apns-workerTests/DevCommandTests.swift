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
        let watch =
            Self.section(printed, from: "Watch the results", to: "List the app's channels")
            .split(separator: "\n").first.map(String.init) ?? ""
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
        // The channel the worker broadcast to is the app's, as channel management lists it.
        let binary = WorkerCommand.binary.path
        let listed = try Self.shell(list.replacingOccurrences(of: "apns-worker channels", with: binary + " channels"))
        #expect(listed.status == 0 && listed.output.contains(channel), "\(listed.output)")

        dev.signal(SIGTERM)
        let stopBy = ContinuousClock.now + .seconds(60)
        while dev.exitStatus() == nil, ContinuousClock.now < stopBy { try await Task.sleep(for: .milliseconds(100)) }
        #expect(dev.exitStatus() == 0, "dev did not stop with 0 on SIGTERM")
    }
}
