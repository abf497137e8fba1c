import Foundation
import TestPeers

/// Debian's `nghttpd` (nghttp2-server) as an independent HTTP/2 + TLS peer, started per test on a
/// free port with the test PKI's server certificate, stopped (killed and reaped) by `stop()`.
///
/// Its document root has `3/device/<token>` files for tokens that should get 200 (it answers POST
/// with the file), none for 404, and a FIFO for a token whose request hangs the server (nghttpd
/// blocks opening it: no answer, no PING ACK), for deadline and PING-timeout tests.
final class Nghttpd: @unchecked Sendable {
    // @unchecked Sendable: `program` is set in init and only read afterwards.
    let port: Int
    let documentRoot: TemporaryDirectory
    /// Started with posix_spawn (`spawnInBackground`), not Foundation's `Process`, whose `run()`
    /// crashes now and then on Linux.
    private let program: BackgroundProgram

    static let deliveredToken = "00aa11bb22cc33dd44ee55ff66778899aabbccddeeff00112233445566778899"
    static let hangingToken = "deadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeefdeadbeef"

    init(pki: TestPKI, port: Int? = nil, arguments: [String] = []) throws {
        documentRoot = try TemporaryDirectory()
        let devices = documentRoot.file("3/device")
        try FileManager.default.createDirectory(atPath: devices, withIntermediateDirectories: true)
        try "{}".write(toFile: devices + "/" + Self.deliveredToken, atomically: true, encoding: .utf8)
        guard mkfifo(devices + "/" + Self.hangingToken, 0o600) == 0 else { throw TestFailure("mkfifo failed") }
        // A port picked free can be taken by a parallel test's server before nghttpd binds it; then
        // nghttpd exits while the port answers for the other server. Try again on another port.
        for _ in 0..<5 {
            let candidate = try port ?? freePort()
            let program = try spawnInBackground(
                "/usr/bin/env",
                ["nghttpd"] + arguments + [
                    "-d", documentRoot.path, String(candidate), pki.serverKey, pki.serverCertificate,
                ])
            var listening = false
            for _ in 0..<300 where !listening {
                listening = isListening(candidate)
                if !listening { usleep(10_000) }
            }
            usleep(50_000)
            if listening, program.exitStatus() == nil {
                self.port = candidate
                self.program = program
                return
            }
            program.signal(SIGKILL)
            while program.exitStatus() == nil { usleep(10_000) }
        }
        throw TestFailure("nghttpd did not start")
    }

    /// Kills the server (SIGKILL: a blocked server ignores nothing) and reaps it.
    func stop() {
        guard program.exitStatus() == nil else { return }
        program.signal(SIGKILL)
        while program.exitStatus() == nil { usleep(10_000) }
    }

    deinit {
        stop()
    }
}
