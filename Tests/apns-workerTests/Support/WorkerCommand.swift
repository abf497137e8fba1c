import Foundation
import TestPeers

/// The built `apns-worker` binary, run as a user would: exit status, stdout and stderr, stdin.
/// Spawned with posix_spawn (`spawnAndWait`), not Foundation's `Process`, whose `run()` crashes now
/// and then on Linux.
struct WorkerCommand {
    static let binary: URL = {
        // The test bundle sits in the same build folder as the executable.
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("apns-worker")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".build/debug/apns-worker")
    }()

    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// The binary with `arguments` (and `stdin`), to its end; spawned without Foundation's
    /// `Process`, whose `run()` crashes now and then on Linux (see `spawnAndWait`).
    /// `environment`: added to this process's own (the binary inherits both).
    func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> Run {
        let inherited = ProcessInfo.processInfo.environment.merging(environment) { _, added in added }
        let program = try spawnAndWait(
            Self.binary.path, arguments, environment: inherited, stdin: Array((stdin ?? "").utf8), timeout: 120)
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
}
