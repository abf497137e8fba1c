import Foundation

/// moto's S3 server (PyPI `moto[server]`, Apache-2.0) started for one test on a free loopback port,
/// with one bucket: the storage a `TansuBroker` on `.s3` keeps its topics, records and the groups'
/// committed offsets in, so that the broker can be stopped and started again with its data.
///
/// moto keeps every object in its own memory: the data outlives the broker's process, not this
/// server's. It checks no signature, so any credentials do.
package final class S3Server: Sendable {
    package let port: Int
    package let bucket: String
    private let program: BackgroundProgram
    private let logFile: String

    package var endpoint: String { "http://127.0.0.1:\(port)" }

    /// What an S3 client reads (Tansu's `object_store` does) to reach this server and bucket.
    package var clientEnvironment: [String: String] {
        [
            "AWS_ENDPOINT": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
        ]
    }

    private init(port: Int, bucket: String, program: BackgroundProgram, logFile: String) {
        self.port = port
        self.bucket = bucket
        self.program = program
        self.logFile = logFile
    }

    /// `moto_server`: `MOTO_SERVER_BIN` if set, else the one `make deps-tansu` installs into
    /// `.build/peers/venv`.
    package static func binaryPath() throws -> String {
        try peerPath(
            variable: "MOTO_SERVER_BIN", installed: ".build/peers/venv/bin/moto_server", what: "moto's S3 server")
    }

    /// Starts the server on a free loopback port and makes the bucket; ready when this returns.
    package static func start(bucket: String = "tansu") async throws -> S3Server {
        let binary = try binaryPath()
        var lastError: (any Error)?
        // A free port can be taken between choosing it and the server binding it: then try another.
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            let log = FileManager.default.temporaryDirectory
                .appendingPathComponent("moto-\(getpid())-\(port)-\(UUID().uuidString.prefix(6)).log").path
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            let command =
                "exec " + [binary, "-H", "127.0.0.1", "-p", "\(port)"].map(shellQuoted).joined(separator: " ")
                + " </dev/null >" + shellQuoted(log) + " 2>&1"
            let program = try spawnInBackground("/bin/sh", ["-c", command])
            // Ready once it answers: the bucket's creation is the first request (Python takes a
            // second or two to start).
            let deadline = ContinuousClock.now + .seconds(30)
            var answer = ""
            while ContinuousClock.now < deadline, program.exitStatus() == nil {
                answer = httpRequest(port: port, "PUT /\(bucket) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n")
                if answer.hasPrefix("HTTP/1.1 200") {
                    return S3Server(port: port, bucket: bucket, program: program, logFile: log)
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            program.signal(SIGKILL)
            _ = program.waitUntilExit()
            lastError = TansuBroker.Failure(
                description: "moto_server on port \(port): \(answer.prefix(200)) \((fileText(log) ?? "").suffix(500))")
            try? FileManager.default.removeItem(atPath: log)
        }
        throw lastError ?? TansuBroker.Failure(description: "moto_server did not start")
    }

    /// What it printed (one line per request).
    package var log: String { fileText(logFile) ?? "" }

    package func shutdown() async {
        await program.terminate()
        try? FileManager.default.removeItem(atPath: logFile)
    }
}

/// One HTTP/1.1 request without a body (`head`: the request line and headers, each ending in CRLF)
/// to `127.0.0.1:port`, and the answer's first bytes ("" when nothing answered within 2 s).
func httpRequest(port: Int, _ head: String) -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 2, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let connected = withLoopbackAddress(port: port) { connect(fd, $0, $1) }
    guard connected == 0 else { return "" }
    let request = Array((head + "Content-Length: 0\r\nConnection: close\r\n\r\n").utf8)
    guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
        return ""
    }
    var buffer = [UInt8](repeating: 0, count: 512)
    let count = recv(fd, &buffer, buffer.count, 0)
    return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : ""
}
