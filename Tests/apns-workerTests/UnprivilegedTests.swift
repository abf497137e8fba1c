import Foundation
import Testing

/// The worker as the container image runs it: a user without privileges (uid 10001).
@Suite("apns-worker without privileges (the binary)", .timeLimit(.minutes(2)))
struct UnprivilegedTests {
    // Every TCP connection the worker made or accepted was closed at once for any user but root: the
    // TCP_NODELAY option was set as ChannelOptions.socketOption(.tcp_nodelay), which is SOL_SOCKET
    // option 1, SO_DEBUG, which only root may set. /health gave empty replies, APNs requests failed.
    @Test("demo as uid 10001: every event ends as expected (exit 0)")
    func demoAsAnUnprivilegedUser() throws {
        let process = Process()
        if geteuid() == 0 {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = [
                "--reuid=10001", "--regid=10001", "--clear-groups", "--", ValidateCommandTests.binary.path, "demo",
            ]
        } else {
            process.executableURL = ValidateCommandTests.binary
            process.arguments = ["demo"]
        }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        // The demo's temporary files go where user 10001 may write.
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": "/tmp"]) { $1 }
        try process.run()
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(output.suffix(1500))")
        #expect(!output.contains("UNEXPECTED"))
    }
}
