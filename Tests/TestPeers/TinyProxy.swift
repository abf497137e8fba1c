import Foundation

/// Debian's tinyproxy (package tinyproxy-bin) as an HTTP CONNECT proxy for tests: started on a free
/// loopback port with a configuration of its own, optionally demanding Basic authentication, logging
/// every connection to a file the test reads. Stopped with SIGTERM.
package final class TinyProxy: @unchecked Sendable {
    package let port: Int
    package let logFile: String
    private let program: BackgroundProgram
    private let directory: URL

    package static let binary = ProcessInfo.processInfo.environment["TINYPROXY_BIN"] ?? "/usr/bin/tinyproxy"

    /// `username`/`password`: the proxy answers 407 to a CONNECT without them.
    package init(username: String? = nil, password: String? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tinyproxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        logFile = directory.appendingPathComponent("tinyproxy.log").path
        port = try freeLoopbackPort()
        var configuration = """
            Port \(port)
            Listen 127.0.0.1
            Timeout 60
            LogFile "\(logFile)"
            LogLevel Info
            MaxClients 100
            Allow 127.0.0.1

            """
        if let username, let password { configuration += "BasicAuth \(username) \(password)\n" }
        let configurationFile = directory.appendingPathComponent("tinyproxy.conf")
        try configuration.write(to: configurationFile, atomically: true, encoding: .utf8)
        program = try spawnInBackground(Self.binary, ["-d", "-c", configurationFile.path])
        let deadline = Date().addingTimeInterval(10)
        while !Self.accepts(port) {
            guard program.exitStatus() == nil, Date() < deadline else {
                stop()
                throw TinyProxyError(description: "tinyproxy did not listen on 127.0.0.1:\(port): \(log)")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    package struct TinyProxyError: Error, CustomStringConvertible {
        package let description: String
    }

    /// What tinyproxy logged so far.
    package var log: String { fileText(logFile) ?? "" }

    /// SIGTERM, then SIGKILL after two seconds: tinyproxy waits for its open tunnels on SIGTERM.
    package func stop() {
        if program.exitStatus() == nil {
            program.signal(SIGTERM)
            let deadline = Date().addingTimeInterval(2)
            while program.exitStatus() == nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            if program.exitStatus() == nil { program.signal(SIGKILL) }
            while program.exitStatus() == nil { Thread.sleep(forTimeInterval: 0.01) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
