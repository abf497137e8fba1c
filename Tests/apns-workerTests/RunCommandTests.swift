import Crypto
import Foundation
import TestPeers
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

    // A binary built against 2.8 loaded Debian 12's 2.0.2 through LD_LIBRARY_PATH and ran on it,
    // saying so only in --version.
    @Test("an older librdkafka loaded in place of the one built with: run and check exit 2 naming both versions")
    func olderLibrdkafkaLoaded() throws {
        // The system's own librdkafka.so.1 (Debian 12's 2.0.2 where the tests install kcat).
        let directory = try #require(
            ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"].first {
                FileManager.default.fileExists(atPath: "\($0)/librdkafka.so.1")
            }, "no system librdkafka.so.1 (make test installs kcat, which brings one)")
        let environment = ["LD_LIBRARY_PATH": directory]
        let version = try WorkerCommand().run(["--version"], environment: environment)
        let loaded = try #require(
            version.stdout.split(separator: "\n").first { $0.hasPrefix("librdkafka ") }?.dropFirst(11))
        let path = try configuration(host: "127.0.0.1", port: 0)
        for command in [["run", "--config", path], ["check", "--config", path, "--broker-timeout", "1"]] {
            let run = try WorkerCommand().run(command, environment: environment)
            if loaded.compare("2.14.2", options: .numeric) == .orderedAscending {
                #expect(run.status == 2, "\(command[0]): \(run.stderr)")
                #expect(
                    run.stderr.contains("librdkafka \(loaded) is loaded, and apns-worker needs 2.14.2 or later"),
                    "\(command[0]): \(run.stderr)")
            } else {
                #expect(!run.stderr.contains("is loaded, and apns-worker needs"), "\(loaded) is supported")
            }
        }
    }

    /// `GET path` on 127.0.0.1:`port`, HTTP/1.0 over a plain socket: the body, or `nil`.
    static func get(port: Int, _ path: String) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return nil }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard write(fd, request, request.count) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            response += buffer[0..<count]
        }
        let text = String(decoding: response, as: UTF8.self)
        return text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) }
    }

    // With http.port 0 and logging at warning, run never said which port it took; a first scrape
    // had no process metrics and no degraded-publish series.
    @Test(
        "run on port 0 at warning says where it listens; the first scrape has process metrics and every degraded-publish series at 0"
    )
    func firstScrape() throws {
        let path = try configuration(host: "127.0.0.1", port: 0)
        let text = try String(contentsOfFile: path, encoding: .utf8) + "\nlogging:\n  level: warning\n"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let worker = try spawnInBackground(WorkerCommand.binary.path, ["run", "--config", path])
        defer {
            worker.signal(SIGTERM)
            worker.waitUntilExit()
        }
        var port: Int?
        let deadline = Date().addingTimeInterval(30)
        while port == nil, Date() < deadline, worker.isRunning {
            for line in worker.stdout.split(separator: "\n") where line.contains("operations endpoint listening on") {
                if let range = line.range(of: #"listening on 127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                    port = Int(line[range].split(separator: ":").last ?? "")
                }
            }
            usleep(100_000)
        }
        let bound = try #require(port, "no listening line in: \(worker.stdout)")
        let metrics = try #require(Self.get(port: bound, "/metrics"))
        for name in [
            "process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
            "process_threads", "process_start_time_seconds",
        ] {
            #expect(metrics.contains("# TYPE \(name) gauge\n\(name) "), "\(name) missing")
        }
        #expect(metrics.contains("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "))
        let resident = metrics.split(separator: "\n").first { $0.hasPrefix("process_resident_memory_bytes ") }
            .flatMap { Double($0.split(separator: " ")[1]) }
        #expect((resident ?? 0) > 1_000_000, "resident memory is megabytes, not \(resident ?? 0)")
        #expect(
            metrics.contains(#"apns_worker_partition_stall_seeks_total{topic="notifications"} 0"#),
            "the stall seeks of each input topic, at 0 before any stall")
        for topic in ["results", "dead-letters"] {
            for reason in ["MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD"] {
                #expect(
                    metrics.contains(#"apns_worker_published_degraded_total{topic="\#(topic)",reason="\#(reason)"} 0"#),
                    "\(topic) \(reason)")
            }
        }
    }
}
