import Foundation
import TestPeers
import Testing

/// The worker as the container image runs it: a user without privileges (uid 10001).
@Suite("apns-worker without privileges (the binary)", .timeLimit(.minutes(2)))
struct UnprivilegedTests {
    // Every TCP connection the worker made or accepted was closed at once for any user but root: the
    // TCP_NODELAY option was set as ChannelOptions.socketOption(.tcp_nodelay), which is SOL_SOCKET
    // option 1, SO_DEBUG, which only root may set. /health gave empty replies, APNs requests failed.
    @Test("demo as uid 10001: every event ends as expected (exit 0), the Live Activity broadcast included")
    func demoAsAnUnprivilegedUser() throws {
        let binary = WorkerCommand.binary.path
        let (path, arguments) =
            geteuid() == 0
            ? ("/usr/bin/setpriv", ["--reuid=10001", "--regid=10001", "--clear-groups", "--", binary, "demo"])
            : (binary, ["demo"])
        // The demo's temporary files go where user 10001 may write.
        let environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": "/tmp"]) { $1 }
        let program = try spawnAndWait(path, arguments, environment: environment, timeout: 110)
        let output = program.stdout + program.stderr
        #expect(program.status == 0, "\(output.suffix(1500))")
        #expect(!output.contains("UNEXPECTED"))
        #expect(output.contains("every event ended as expected"), "\(output.suffix(1500))")
        // A channel made through channel management, and every update broadcast through Kafka delivered.
        #expect(output.contains("channel management, No Message Stored"), "\(output.suffix(1500))")
        #expect(output.contains("4 Live Activity updates through Kafka, 4 accepted by the simulator"))
        let delivered = output.split(separator: "\n").filter {
            $0.contains("broadcast-") && $0.contains(": delivered, apns-request-id ")
        }
        #expect(delivered.count == 4, "\(output.suffix(1500))")
    }
}
