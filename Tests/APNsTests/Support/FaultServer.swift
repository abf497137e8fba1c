import Foundation
import TestPeers

/// `Tests/Peers/apns_fault_server.py`: a scripted APNs look-alike on Python's hyper-h2 (an HTTP/2
/// stack shared with neither the client nor the simulator), started per test on port 0 and killed by
/// `stop()`.
final class FaultServer: @unchecked Sendable {
    // @unchecked Sendable: every stored property is set in init and only read afterwards.
    let port: Int
    /// Started with posix_spawn (`spawnInBackground`), not Foundation's `Process`.
    private let process: BackgroundProgram

    static var scriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Peers/apns_fault_server.py").path
    }

    init(pki: TestPKI, _ arguments: [String] = []) throws {
        process = try spawnInBackground(
            "/usr/bin/python3", [Self.scriptPath, "--cert", pki.serverCertificate, "--key", pki.serverKey] + arguments)
        // The first line is "LISTENING <port>".
        let deadline = Date().addingTimeInterval(30)
        var line = ""
        while Date() < deadline, process.isRunning {
            if let end = process.stdout.firstIndex(of: "\n") {
                line = String(process.stdout[..<end])
                break
            }
            usleep(10_000)
        }
        let words = line.split(whereSeparator: \.isWhitespace)
        guard words.count >= 2, words[0] == "LISTENING", let port = Int(words[1]) else {
            process.signal(SIGKILL)
            process.waitUntilExit()
            throw TestFailure("fault server did not start: \(process.stdout)")
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
        process.signal(SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        stop()
    }
}
