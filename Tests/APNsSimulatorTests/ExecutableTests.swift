import APNsSimulator
import Foundation
import Testing

/// The built `apns-simulator`, next to the test binary.
func simulatorExecutable() throws -> String {
    let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path
    let path = dir + "/apns-simulator"
    guard FileManager.default.isExecutableFile(atPath: path) else {
        Issue.record("apns-simulator not built at \(path)")
        throw RawClientError.noResponse(0)
    }
    return path
}

@Suite("apns-simulator executable and h2load")
struct ExecutableTests {
    @Test("the executable takes its flags, prints where it listens first, and its counters on SIGTERM")
    func flagsFirstLineAndCountersOnSIGTERM() async throws {
        let dir = try TemporaryDirectory()
        let key = TestSigningKey()
        let keyFile = try dir.write("AuthKey.p8", key.p8)
        let simulator = try SimulatorProcess([
            "--port", "0", "--tls-dir", dir.path + "/tls", "--token-key", "\(key.teamID):\(key.keyID):\(keyFile)",
            "--device", "\(Fixture.device)=\(Fixture.topic)", "--unregistered", "\(Fixture.goneDevice)=1700000000",
            "--fault", "TooManyRequests=0", "--latency", "1ms..2ms", "--max-streams", "50", "--development",
        ])
        let first = try await simulator.waitForLines(1)[0]
        #expect(first.hasPrefix("listening on 127.0.0.1:"))
        let port = try #require(Int(first.split(separator: ":").last ?? ""))
        #expect(port > 0)
        #expect(FileManager.default.fileExists(atPath: dir.path + "/tls/ca.pem"))

        let body = try dir.write("body.json", Fixture.payload)
        for token in [Fixture.device, Fixture.goneDevice] {
            let output = try await run(
                "/usr/bin/nghttp",
                [
                    "-v", "-d", body, "-H", "apns-topic: " + Fixture.topic, "-H",
                    "authorization: " + key.authorization(),
                    "https://127.0.0.1:\(port)/3/device/\(token)",
                ])
            let answer = NghttpAnswer(output.stdout)
            #expect(answer.status == (token == Fixture.device ? 200 : 410))
            if token == Fixture.device { #expect(output.stdout.contains("apns-unique-id"), "--development") }
        }
        let (status, text) = try await simulator.stop()  // SIGTERM
        #expect(status == 0)
        #expect(text.contains("\n200 1\n"), "\(text)")
        #expect(text.contains("410 Unregistered 1"), "\(text)")
    }

    @Test(
        "a flag it cannot read stops it before it listens, naming the flag: a fault, a latency, an unregistered time, an idle timeout, a share out of range or shares past 1, an unregistered share with no accepting policy, two accepting policies"
    )
    func badFlagsStopBeforeListening() async throws {
        let dir = try TemporaryDirectory()
        let cases: [(flags: [String], named: String)] = [
            (["--fault", "NoSuchReason=0.5"], "--fault"),
            (["--latency", "5 parsecs"], "--latency"),
            (["--unregistered", "\(Fixture.goneDevice)=yesterday"], "--unregistered"),
            (["--idle-timeout", "5"], "--idle-timeout"),
            (["--throttle-fraction", "2"], "--throttle-fraction"),
            (["--throttle-fraction", "0.6", "--fault-fraction", "0.6"], "--fault-fraction"),
            (["--unregistered-fraction", "0.5"], "--unregistered-fraction"),
            (["--accept-any-device", "--accept-token-bytes", "32"], "--accept-token-bytes"),
        ]
        for (flags, named) in cases {
            let output = try await run(
                try simulatorExecutable(), ["--port", "0", "--tls-dir", dir.path + "/tls", "--no-auth"] + flags,
                timeout: 30)
            #expect(output.status != 0, "\(flags)")
            #expect(!output.stdout.contains("listening on"), "\(flags): \(output.stdout)")
            #expect(output.stderr.contains(named), "\(flags): \(output.stderr)")
        }
    }

    @Test(
        "--accept-token-bytes 32 --unregistered-fraction 1: a 32-byte token gets 410 Unregistered, a 2-byte one 400 BadDeviceToken; --throttle-fraction 1: 429"
    )
    func misbehaviourFlags() async throws {
        let dir = try TemporaryDirectory()
        let body = try dir.write("body.json", Fixture.payload)
        for (flags, answers) in [
            (["--accept-token-bytes", "32", "--unregistered-fraction", "1"], [(Fixture.device, 410), ("abcd", 400)]),
            (["--accept-any-device", "--throttle-fraction", "1"], [(Fixture.device, 429)]),
        ] {
            let simulator = try SimulatorProcess(
                ["--port", "0", "--tls-dir", dir.path + "/tls", "--no-auth"] + flags)
            let first = try await simulator.waitForLines(1)[0]
            let port = try #require(Int(first.split(separator: ":").last ?? ""))
            for (token, status) in answers {
                let output = try await run(
                    "/usr/bin/nghttp",
                    [
                        "-v", "-d", body, "-H", "apns-topic: " + Fixture.topic,
                        "https://127.0.0.1:\(port)/3/device/\(token)",
                    ])
                #expect(NghttpAnswer(output.stdout).status == status, "\(flags) \(token): \(output.stdout)")
            }
            #expect(try await simulator.stop().0 == 0)
        }
    }

    @Test("h2load gets only 200s, and recording stays bounded")
    func h2loadGetsOnly200AndRecordingStaysBounded() async throws {
        let key = TestSigningKey()
        try await withSimulator(
            key: key,
            {
                $0.recordLimit = 100; $0.threads = 2
            }
        ) { simulator, dir in
            let body = dir + "/body.json"
            try padded(256).write(toFile: body, atomically: true, encoding: .utf8)
            let output = try await run(
                "/usr/bin/h2load",
                [
                    "-n", "4000", "-c", "4", "-m", "100", "-d", body,
                    "-H", "authorization: " + key.authorization(), "-H", "apns-topic: " + Fixture.topic,
                    "-H", "apns-push-type: alert",
                    "https://127.0.0.1:\(simulator.port)/3/device/\(Fixture.device)",
                ], timeout: 120)
            #expect(output.stdout.contains("status codes: 4000 2xx, 0 3xx, 0 4xx, 0 5xx"), "\(output.stdout)")
            #expect(simulator.observation.count(status: 200) == 4000)
            #expect(simulator.observation.records.count == 100)
            #expect(simulator.observation.droppedRecords == 3900)
            #expect(simulator.observation.totalConnections == 4)
        }
    }
}

@Suite("APNsSimulatorService")
struct SimulatorServiceTests {
    @Test("cancelling the service shuts the simulator down and closes its connections")
    func cancellationShutsTheSimulatorDown() async throws {
        let dir = try TemporaryDirectory()
        let simulator = try await Simulator.start(SimulatorConfiguration(tls: .directory(dir.path + "/tls")))
        let task = Task { try await APNsSimulatorService(simulator).run() }
        try await withClientGroup { group in
            let client = try await RawHTTP2Client.connect(
                group: group, port: simulator.port, caPath: simulator.certificateAuthorityPath!)
            #expect(try await eventually { simulator.observation.liveConnections == 1 })
            task.cancel()
            try await task.value
            #expect(try await eventually { client.isClosed })
            await client.close()
            // Nothing reaches the stopped simulator any more. (The connect itself may succeed: with
            // tests running in parallel, another listener can be given the freed port at once.)
            let before = simulator.observation.totalConnections
            let late = try? await RawHTTP2Client.connect(
                group: group, port: simulator.port, caPath: simulator.certificateAuthorityPath!)
            await late?.close()
            #expect(simulator.observation.totalConnections == before)
        }
    }
}
