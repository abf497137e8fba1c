import Foundation
import Testing

/// `apns-worker dev` as a user meets it: start it, follow the instructions it prints (its own kcat
/// command lines, run by a shell), see the result event, stop it with SIGTERM.
@Suite("apns-worker dev (the binary)", .timeLimit(.minutes(3)))
struct DevCommandTests {
    /// Collects a child's standard output as it arrives.
    final class Output: @unchecked Sendable {
        // @unchecked: `text` is only touched under `lock`.
        private let lock = NSLock()
        private var text = ""

        func append(_ data: Data) {
            lock.lock()
            text += String(decoding: data, as: UTF8.self)
            lock.unlock()
        }

        var value: String {
            lock.lock()
            defer { lock.unlock() }
            return text
        }
    }

    static func shell(_ command: String) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// The lines of `text` between the line containing `start` and the one containing `end`.
    static func section(_ text: String, from start: String, to end: String) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.firstIndex(where: { $0.contains(start) }),
            let last = lines[first...].firstIndex(where: { $0.contains(end) })
        else { return "" }
        return lines[(first + 1)..<last].joined(separator: "\n")
    }

    @Test("the printed kcat commands send an event and show its delivered result; SIGTERM exits 0")
    func followTheInstructions() async throws {
        let process = Process()
        process.executableURL = ValidateCommandTests.binary
        process.arguments = ["dev"]
        let out = Pipe()
        let output = Output()
        out.fileHandleForReading.readabilityHandler = { handle in output.append(handle.availableData) }
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            out.fileHandleForReading.readabilityHandler = nil
        }

        let deadline = ContinuousClock.now + .seconds(60)
        while !output.value.contains("Ctrl-C stops everything"), ContinuousClock.now < deadline, process.isRunning {
            try await Task.sleep(for: .milliseconds(100))
        }
        let printed = output.value
        #expect(printed.contains("Kafka bootstrap"), "dev printed: \(printed)")
        let send = Self.section(printed, from: "Send an event:", to: "Watch the results")
        let watch =
            Self.section(printed, from: "Watch the results", to: "Replay dead letters")
            .split(separator: "\n").first.map(String.init) ?? ""
        try #require(send.contains("kcat") && watch.contains("kcat"), "no kcat commands in: \(printed)")

        // The user's first command, as printed (a shell joins its continued lines).
        #expect(try Self.shell(send).status == 0)
        // The second, bounded: one message, then exit (the printed one follows forever).
        let once = watch + " -o beginning -c 1 -e"
        var result = ""
        while result.isEmpty, ContinuousClock.now < deadline + .seconds(60) {
            result = try Self.shell(once).output.trimmingCharacters(in: .whitespacesAndNewlines)
            if result.isEmpty { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(result.hasPrefix("e1 "), "result line: \(result)")
        #expect(result.contains(#""outcome":"delivered""#), "result line: \(result)")

        kill(process.processIdentifier, SIGTERM)
        let stopBy = ContinuousClock.now + .seconds(60)
        while process.isRunning, ContinuousClock.now < stopBy { try await Task.sleep(for: .milliseconds(100)) }
        #expect(!process.isRunning, "dev did not stop on SIGTERM")
        if !process.isRunning { #expect(process.terminationStatus == 0) }
    }
}
