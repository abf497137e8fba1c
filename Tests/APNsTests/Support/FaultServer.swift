import Foundation

/// `Tests/Peers/apns_fault_server.py`: a scripted APNs look-alike on Python's hyper-h2 (an HTTP/2
/// stack shared with neither the client nor the simulator), started per test on port 0 and killed by
/// `stop()`.
final class FaultServer: @unchecked Sendable {
    // @unchecked Sendable: every stored property is set in init and only read afterwards.
    let port: Int
    private let process: Process

    static var scriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Peers/apns_fault_server.py").path
    }

    init(pki: TestPKI, _ arguments: [String] = []) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Self.scriptPath, "--cert", pki.serverCertificate, "--key", pki.serverKey] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The first line is "LISTENING <port>".
        var line = Data()
        let handle = output.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let words = String(decoding: line, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard words.count >= 2, words[0] == "LISTENING", let port = Int(words[1]) else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            throw TestFailure("fault server did not start: \(String(decoding: line, as: UTF8.self))")
        }
        self.port = port
    }

    struct Stats: Decodable {
        var requests: Int
        var answered: Int
        var max_open: Int
        var over_limit: Int
        var connections: Int
    }

    /// Fetched with Debian's `nghttp` client.
    func stats() throws -> Stats {
        let data = try runCommand(["nghttp", "https://127.0.0.1:\(port)/stats"])
        return try JSONDecoder().decode(Stats.self, from: data)
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        stop()
    }
}
