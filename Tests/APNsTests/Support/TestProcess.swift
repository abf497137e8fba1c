import Foundation
import NIOConcurrencyHelpers
import TestPeers

#if canImport(Glibc)
    import Glibc
#endif

/// A temporary directory removed when the value is released.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "apns-tests-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed") }
        path = String(cString: made)
    }

    func file(_ name: String) -> String { path + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs a command (looked up on PATH) to completion; throws with its stderr if it fails. Spawned with
/// posix_spawn (`spawnAndWait`), not Foundation's `Process`, whose `run()` crashes now and then on Linux.
@discardableResult
func runCommand(_ arguments: [String], input: Data? = nil) throws -> Data {
    let program = try spawnAndWait("/usr/bin/env", arguments, stdin: Array(input ?? Data()), timeout: 120)
    guard program.status == 0 else {
        throw TestFailure("\(arguments.joined(separator: " ")) failed (\(program.status)): \(program.stderr)")
    }
    return Data(program.stdout.utf8)
}

/// Ports already handed out in this test process: the kernel may give a released port again, and two
/// parallel tests must not start servers on the same one.
private let handedOutPorts = NIOLockedValueBox(Set<Int>())

/// A TCP port that was free a moment ago (bound to 0, read back, released), never the same twice.
func freePort() throws -> Int {
    for _ in 0..<50 {
        let port = try kernelFreePort()
        if handedOutPorts.withLockedValue({ $0.insert(port).inserted }) { return port }
    }
    throw TestFailure("no fresh free port")
}

private func kernelFreePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw TestFailure("bind failed") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts TCP connections on 127.0.0.1:port.
func isListening(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    } == 0
}
