import APNsSimulator
import Foundation
import TestPeers
import Testing

/// The `apns-simulator` executable run by a test: its stdout collected, SIGTERM at the end. Spawned
/// without Foundation's `Process` (see `spawnAndWait`).
struct SimulatorProcess: Sendable {
    private let program: BackgroundProgram

    init(_ arguments: [String]) throws {
        program = try spawnInBackground(try simulatorExecutable(), arguments)
    }

    var text: String { program.stdout }
    var lines: [String] { text.split(separator: "\n").map(String.init) }

    /// Waits for at least `count` lines of output.
    func waitForLines(_ count: Int) async throws -> [String] {
        guard try await eventually(timeout: 30, { lines.count >= count }) else {
            Issue.record("apns-simulator printed only: \(text)")
            throw RawClientError.noResponse(0)
        }
        return lines
    }

    /// SIGTERM; waits for the exit and returns the exit status and everything printed.
    func stop() async throws -> (Int32, String) {
        program.signal()
        var status: Int32?
        _ = try await eventually(timeout: 30) {
            status = program.exitStatus()
            return status != nil
        }
        // The output pipe ends with the program; give the reading thread the last bytes.
        _ = try await eventually(timeout: 5) { text.contains("goaway sent") }
        return (status ?? -1, text)
    }
}

/// What `nghttp -v` printed about one answer, with the headers broadcasts and channel management carry.
struct NghttpBroadcastAnswer {
    var status: Int?
    var reason: String?
    var requestID: String?
    var uniqueID: String?
    var channelID: String?
    /// The body as printed (nghttp writes it to stdout between its frame logs).
    var output: String

    init(_ text: String) {
        let answer = NghttpAnswer(text)
        status = answer.status
        reason = answer.reason
        requestID = NghttpAnswer.capture(#"recv \(stream_id=\d+\) apns-request-id: ([0-9a-f-]+)"#, text)
        uniqueID = NghttpAnswer.capture(#"recv \(stream_id=\d+\) apns-unique-id: ([0-9a-f-]+)"#, text)
        channelID = NghttpAnswer.capture(#"recv \(stream_id=\d+\) apns-channel-id: ([A-Za-z0-9+/=]+)"#, text)
        output = text
    }
}

@Suite("Broadcast and channel management through nghttp, against the apns-simulator executable")
struct NghttpBroadcastTests {
    static let presetChannel = "cHJlc2V0LWNoYW5uZWwtMDE="

    /// Runs nghttp with these headers (and `body` as its data, which makes it a POST) against `url`.
    func nghttp(_ url: String, headers: [String], body: String? = nil, dir: borrowing TemporaryDirectory)
        async throws -> NghttpBroadcastAnswer
    {
        var args = ["-v"]
        for header in headers { args += ["-H", header] }
        if let body { args += ["-d", try dir.write("body-\(UUID().uuidString).json", body)] }
        args.append(url)
        let output = try await run("/usr/bin/nghttp", args)
        return NghttpBroadcastAnswer(output.stdout)
    }

    @Test("nghttp creates, reads, lists and deletes channels and broadcasts on one, with a JWT made by the test")
    func lifecycle() async throws {
        let dir = try TemporaryDirectory()
        let key = TestSigningKey()
        let keyFile = try dir.write("AuthKey.p8", key.p8)
        let simulator = try SimulatorProcess([
            "--port", "0", "--manage-port", "0", "--tls-dir", dir.path + "/tls",
            "--token-key", "\(key.teamID):\(key.keyID):\(keyFile)",
            "--channel", "\(Fixture.topic):1:\(Self.presetChannel)", "--channel", "\(Fixture.topic):0",
            "--broadcast-disabled", Fixture.noBroadcastApp, "--channel-limit", "3",
        ])
        let lines = try await simulator.waitForLines(5)
        #expect(lines[0].hasPrefix("listening on 127.0.0.1:"), "the first line is unchanged")
        #expect(lines[1].hasPrefix("managing channels on 127.0.0.1:"))
        let port = try #require(Int(lines[0].split(separator: ":").last ?? ""))
        let managePort = try #require(Int(lines[1].split(separator: ":").last ?? ""))
        #expect(port != managePort)
        #expect(lines[2] == "trust \(dir.path)/tls/ca.pem")
        #expect(lines[3] == "channel \(Fixture.topic):1:\(Self.presetChannel)")
        let made = try #require(lines[4].split(separator: ":").last.map(String.init))
        #expect(lines[4] == "channel \(Fixture.topic):0:\(made)")
        #expect(Data(base64Encoded: made) != nil)

        let auth = "authorization: " + key.authorization()
        let channels = "https://127.0.0.1:\(managePort)/1/apps/\(Fixture.topic)/channels"
        let requestID = "123e4567-e89b-12d3-a456-4266554400a0"
        let created = try await nghttp(
            channels, headers: [auth, "apns-request-id: " + requestID], body: Fixture.createBody, dir: dir)
        #expect(created.status == 201, "\(created.output.suffix(800))")
        #expect(created.requestID == requestID)
        let id = try #require(created.channelID)

        let read = try await nghttp(channels, headers: [auth, "apns-channel-id: " + id], dir: dir)
        #expect(read.status == 200)
        #expect(read.output.contains(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#))
        #expect(isLowercaseUUID(read.requestID))

        let list = try await nghttp(
            "https://127.0.0.1:\(managePort)/1/apps/\(Fixture.topic)/all-channels", headers: [auth], dir: dir)
        #expect(list.status == 200)
        #expect(list.output.contains(#"{"channels":["\#(Self.presetChannel)","\#(made)","\#(id)"]}"#))

        let full = try await nghttp(channels, headers: [auth], body: Fixture.createBody, dir: dir)
        #expect(full.status == 400)
        #expect(full.reason == "CannotCreateChannelConfig", "--channel-limit 3")

        let disabled = try await nghttp(
            "https://127.0.0.1:\(managePort)/1/apps/\(Fixture.noBroadcastApp)/all-channels", headers: [auth], dir: dir)
        #expect(disabled.reason == "FeatureNotEnabled")

        let broadcastURL = "https://127.0.0.1:\(port)/4/broadcasts/apps/\(Fixture.topic)"
        let broadcastHeaders = [
            auth, "apns-push-type: LiveActivity", "apns-expiration: 0", "apns-priority: 10",
        ]
        let sent = try await nghttp(
            broadcastURL, headers: broadcastHeaders + ["apns-channel-id: " + id], body: Fixture.broadcastPayload,
            dir: dir)
        #expect(sent.status == 200, "\(sent.output.suffix(800))")
        #expect(isLowercaseUUID(sent.requestID))
        #expect(isLowercaseUUID(sent.uniqueID))
        let unstored = try await nghttp(
            broadcastURL,
            headers: [auth, "apns-push-type: liveactivity", "apns-expiration: 1900000000", "apns-priority: 5"]
                + ["apns-channel-id: " + made],
            body: Fixture.broadcastPayload, dir: dir)
        #expect(unstored.reason == "BadExpirationDate", "a channel that stores no message takes expiration 0 only")

        let deleted = try await nghttp(
            channels, headers: [auth, ":method: DELETE", "apns-channel-id: " + id], dir: dir)
        #expect(deleted.status == 204, "\(deleted.output.suffix(800))")
        let gone = try await nghttp(channels, headers: [auth, "apns-channel-id: " + id], dir: dir)
        #expect(gone.status == 400)
        #expect(gone.reason == "ChannelNotRegistered")
        let late = try await nghttp(
            broadcastURL, headers: broadcastHeaders + ["apns-channel-id: " + id], body: Fixture.broadcastPayload,
            dir: dir)
        #expect(late.reason == "ChannelNotRegistered")

        let (status, printed) = try await simulator.stop()
        #expect(status == 0)
        #expect(printed.contains("\n201 1\n"), "\(printed)")
        #expect(printed.contains("\n204 1\n"))
        #expect(printed.contains("\n200 3\n"), "read, list, broadcast")
        #expect(printed.contains("400 ChannelNotRegistered 2"))
        #expect(printed.contains("broadcasts \(id) 1"))
    }

    @Test(
        "--token-key with an environment, --fault with a broadcast reason and Apple's spelled-out 503, through nghttp")
    func keyEnvironmentAndFaults() async throws {
        let dir = try TemporaryDirectory()
        let production = TestSigningKey(keyID: "PRODKEY123")
        let development = TestSigningKey(keyID: "DEVKEY1234")
        let simulator = try SimulatorProcess([
            "--port", "0", "--tls-dir", dir.path + "/tls",
            "--token-key",
            "\(production.teamID):\(production.keyID):\(try dir.write("p.p8", production.p8)):production",
            "--token-key",
            "\(development.teamID):\(development.keyID):\(try dir.write("d.p8", development.p8)):development",
            "--channel", "\(Fixture.topic):1:\(Self.presetChannel)", "--fault", "Service Unavailable=0.2",
            "--fault", "FeatureNotEnabled=0.8",
        ])
        let lines = try await simulator.waitForLines(4)
        let port = try #require(Int(lines[0].split(separator: ":").last ?? ""))
        let url = "https://127.0.0.1:\(port)/4/broadcasts/apps/\(Fixture.topic)"
        let headers = [
            "apns-push-type: liveactivity", "apns-expiration: 0", "apns-priority: 10",
            "apns-channel-id: " + Self.presetChannel,
        ]
        let wrong = try await nghttp(
            url, headers: headers + ["authorization: " + development.authorization()], body: Fixture.broadcastPayload,
            dir: dir)
        #expect(wrong.status == 403)
        #expect(wrong.reason == "BadEnvironmentKeyIdInToken", "\(wrong.output.suffix(600))")
        // The simulator's fault seed is fixed, so the draws are the same every run: with these rates the
        // eight requests get both reasons.
        var answers: [String] = []
        for _ in 0..<8 {
            let answer = try await nghttp(
                url, headers: headers + ["authorization: " + production.authorization()],
                body: Fixture.broadcastPayload, dir: dir)
            answers.append(answer.output.contains(#"{"reason":"Service Unavailable"}"#) ? "503" : answer.reason ?? "")
        }
        #expect(Set(answers) == ["503", "FeatureNotEnabled"], "\(answers)")
        let (status, printed) = try await simulator.stop()
        #expect(status == 0)
        #expect(printed.contains("403 BadEnvironmentKeyIdInToken 1"), "\(printed)")
        #expect(printed.contains("503 Service Unavailable"))
    }

    @Test("apns-simulator refuses a --channel it cannot make and a --token-key with an unknown environment")
    func badFlags() async throws {
        let dir = try TemporaryDirectory()
        let key = TestSigningKey()
        let keyFile = try dir.write("AuthKey.p8", key.p8)
        let executable = try simulatorExecutable()
        for flags in [
            ["--channel", "\(Fixture.topic):2"], ["--channel", "\(Fixture.topic):1:not base64!"],
            ["--token-key", "\(key.teamID):\(key.keyID):\(keyFile):staging"],
            ["--related-keys", "\(key.keyID):NOSUCHKEY1", "--token-key", "\(key.teamID):\(key.keyID):\(keyFile)"],
        ] {
            let output = try await run(executable, ["--port", "0", "--tls-dir", dir.path + "/tls"] + flags)
            #expect(output.status != 0, "\(flags)")
            #expect(!output.stdout.contains("listening on"), "\(flags)")
            if flags[1].hasSuffix(":staging") {
                #expect(output.stderr.contains("the environment is development or production, got staging"))
            }
        }
    }
}
