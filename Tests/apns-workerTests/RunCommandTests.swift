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

    func configuration(host: String, port: Int, kafkaExtra: String = "") throws -> String {
        let helper = WorkerCommand()
        let key = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        return try helper.temporaryFile(
            "worker.yaml",
            """
            kafka:
              bootstrap.servers: "127.0.0.1:1"\(kafkaExtra)
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
            let run = try WorkerCommand().run(["run", "--config", path])
            #expect(run.status == 2, "\(host):\(port): \(run.stderr)")
            #expect(run.stderr.contains("http.host/http.port: cannot listen on \(host):\(port)"), "\(run.stderr)")
        }
    }

    @Test("a property librdkafka refuses: run and check exit 2 naming it, before anything starts")
    func librdkafkaRefusesAProperty() throws {
        let path = try configuration(
            host: "127.0.0.1", port: 0, kafkaExtra: "\n  linger.ms: soon\n  sasl.password: hunter2")
        for command in [["run", "--config", path], ["check", "--offline", "--config", path]] {
            let run = try WorkerCommand().run(command)
            #expect(run.status == 2, "\(command[0]): \(run.stderr)")
            #expect(run.stderr.contains("kafka.linger.ms: librdkafka refused it"), "\(command[0]): \(run.stderr)")
            #expect(!run.stderr.contains("hunter2"))
        }
        let valid = try WorkerCommand().run([
            "check", "--offline", "--config", try configuration(host: "127.0.0.1", port: 0),
        ])
        #expect(valid.status == 0, "\(valid.stderr)")
        #expect(valid.stdout.contains("valid"))
    }
}
