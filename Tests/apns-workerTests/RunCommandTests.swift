import Crypto
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `apns-worker run` as an operator starts it, with mistakes in the operations endpoint's settings.
@Suite("apns-worker run (the binary)", .timeLimit(.minutes(1)))
struct RunCommandTests {
    /// A TCP socket listening on 127.0.0.1 at a free port, held until the test ends.
    final class OccupiedPort {
        let descriptor: Int32
        let port: Int

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(fd, pointer, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, pointer, &length) == 0
                }
            }
            descriptor = fd
            port = Int(UInt16(bigEndian: address.sin_port))
            guard bound else { throw CocoaError(.fileWriteUnknown) }
        }

        deinit { close(descriptor) }
    }

    func configuration(host: String, port: Int) throws -> String {
        let helper = ValidateCommandTests()
        let key = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        return try helper.temporaryFile(
            "worker.yaml",
            """
            kafka:
              bootstrap.servers: "127.0.0.1:1"
            consumer:
              topics: [notifications]
            topics:
              results: results
              deadLetters: dead-letters
            apns:
              credentials:
                - name: app
                  topics: ["com.example.app"]
                  token: { teamId: ABCDE12345, keyId: KEY1234567, keyFile: "\(key)" }
            http:
              host: "\(host)"
              port: \(port)
            """)
    }

    // With http.port taken (or http.host not on the machine) there was no error at all: the
    // operations service died alone, the worker ran on without /health or /metrics, and SIGTERM
    // no longer stopped it.
    @Test("a port in use or a host not on this machine: exit 2 naming http.host/http.port")
    func operationsEndpointCannotListen() throws {
        let taken = try OccupiedPort()
        for (host, port) in [("127.0.0.1", taken.port), ("192.0.2.1", 8080)] {
            let path = try configuration(host: host, port: port)
            let run = try ValidateCommandTests().run(["run", "--config", path])
            #expect(run.status == 2, "\(host):\(port): \(run.stderr)")
            #expect(run.stderr.contains("http.host/http.port: cannot listen on \(host):\(port)"), "\(run.stderr)")
        }
    }
}
