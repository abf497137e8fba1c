import Crypto
import Foundation
import TestPeers
import Testing

/// `apns-worker send` against the `apns-simulator` binary, both started here as a user would.
@Suite("apns-worker send (the binary, against apns-simulator)", .timeLimit(.minutes(1)))
struct SendCommandTests {
    static let token = String(repeating: "ab", count: 32)
    static let goneToken = String(repeating: "cd", count: 32)

    /// The simulator, listening on a free port with its CA in `directory/tls`; started with
    /// posix_spawn (`spawnInBackground`), not Foundation's `Process`, whose `run()` crashes now and
    /// then on Linux. Dropping it kills the simulator.
    final class Simulator {
        let program: BackgroundProgram
        let port: Int
        /// The channel-management listener (the startup output's second line).
        let managementPort: Int

        init(directory: String, keyFile: String) throws {
            let binary = WorkerCommand.binary.deletingLastPathComponent().appendingPathComponent(
                "apns-simulator")
            program = try spawnInBackground(
                binary.path,
                [
                    "--port", "0", "--tls-dir", directory + "/tls", "--token-key", "ABCDE12345:KEY1234567:\(keyFile)",
                    "--accept-any-device", "--unregistered", "\(SendCommandTests.goneToken)=1700000000",
                ])
            let deadline = Date().addingTimeInterval(30)
            var lines: [Substring] = []
            while lines.count < 2, Date() < deadline, program.exitStatus() == nil {
                lines = program.stdout.split(separator: "\n", omittingEmptySubsequences: true)
                if lines.count < 2 { usleep(20_000) }
            }
            let first = lines.first ?? ""
            port = try #require(Int(first.split(separator: ":").last ?? ""), "simulator said: \(first)")
            let second = lines.dropFirst().first ?? ""
            managementPort = try #require(
                second.hasPrefix("managing channels on") ? Int(second.split(separator: ":").last ?? "") : nil,
                "simulator said: \(second)")
        }
    }

    @Test("answers print readably: delivered, unregistered with its time; the worker's event rules apply to flags")
    func readableOutcomes() throws {
        let helper = WorkerCommand()
        let key = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        let directory = URL(fileURLWithPath: key).deletingLastPathComponent().path
        let simulator = try Simulator(directory: directory, keyFile: key)
        let common = [
            "--host", "127.0.0.1", "--port", "\(simulator.port)", "--ca-file", directory + "/tls/ca.pem",
            "--key-file", key, "--team-id", "ABCDE12345", "--key-id", "KEY1234567", "--topic", "com.example.app",
        ]
        let delivered = try helper.run(
            ["send"] + common + ["--device-token", Self.token, "--payload", #"{"aps":{"alert":"hi"}}"#])
        #expect(delivered.status == 0, "\(delivered.stdout) \(delivered.stderr)")
        #expect(delivered.stdout.contains("status: 200"))
        #expect(delivered.stdout.contains("outcome: delivered\n"), "\(delivered.stdout)")

        let gone = try helper.run(
            ["send"] + common + ["--device-token", Self.goneToken, "--payload", #"{"aps":{"alert":"hi"}}"#])
        #expect(gone.status == 1)
        #expect(
            gone.stdout.contains(
                "outcome: unregistered: the device token is no longer valid since 2023-11-14T22:13:20Z"),
            "\(gone.stdout)")
        #expect(!gone.stdout.contains("Optional("))

        // A background push with an alert: refused before sending, as the worker would refuse it.
        let background = try helper.run(
            ["send"] + common + [
                "--device-token", Self.token, "--push-type", "background", "--priority", "5", "--payload",
                #"{"aps":{"content-available":1,"alert":"hi"}}"#,
            ])
        #expect(background.status == 1)
        #expect(
            background.stderr.contains("/payload/aps: must not have 'alert', 'sound', 'badge'"), "\(background.stderr)")
    }

    @Test("a server certificate nobody trusts, or a key file that is not there: exit 2 saying why, nothing sent")
    func connectionAndConfigurationErrors() throws {
        let helper = WorkerCommand()
        let key = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        let directory = URL(fileURLWithPath: key).deletingLastPathComponent().path
        let simulator = try Simulator(directory: directory, keyFile: key)
        let notification = [
            "--topic", "com.example.app", "--device-token", Self.token, "--payload", #"{"aps":{"alert":"hi"}}"#,
        ]
        // No --ca-file: the simulator's certificate is checked against the system's roots, and fails.
        let untrusted = try helper.run(
            [
                "send", "--host", "localhost", "--port", "\(simulator.port)", "--key-file", key, "--team-id",
                "ABCDE12345",
                "--key-id", "KEY1234567",
            ] + notification)
        #expect(untrusted.status == 2, "\(untrusted.stdout) \(untrusted.stderr)")
        #expect(untrusted.stdout.contains("serverCertificateRejected"), "\(untrusted.stdout)")
        // The server was not trusted: the key is not to blame, and the pool's info lines stay out
        // of the command's output.
        #expect(!untrusted.stdout.contains("fix the key"), "\(untrusted.stdout)")
        #expect(untrusted.stdout.contains("the key is not the problem"), "\(untrusted.stdout)")
        #expect(!untrusted.stderr.contains("info"), "\(untrusted.stderr)")
        let missingKey = try helper.run(
            [
                "send", "--host", "localhost", "--port", "\(simulator.port)", "--ca-file", directory + "/tls/ca.pem",
                "--key-file", directory + "/missing.p8", "--team-id", "ABCDE12345", "--key-id", "KEY1234567",
            ]
                + notification)
        #expect(missingKey.status == 2)
        #expect(missingKey.stdout.contains("configuration error"), "\(missingKey.stdout)")
        #expect(missingKey.stdout.contains("missing.p8"), "\(missingKey.stdout)")
        // Before: "error: connectFailed: Connection errors: SingleConnectionFailure(…)", then
        // "outcome: retry later".
        let refused = try helper.run(
            [
                "send", "--host", "127.0.0.1", "--port", "1", "--ca-file", directory + "/tls/ca.pem", "--key-file",
                key, "--team-id", "ABCDE12345", "--key-id", "KEY1234567",
            ] + notification)
        #expect(refused.status == 2)
        #expect(
            refused.stdout
                == "error: cannot connect to 127.0.0.1:1 (127.0.0.1: Connection refused)\nnot sent: APNs was not reached\n",
            "\(refused.stdout)")
    }

    @Test(
        "without --proxy, send goes through HTTPS_PROXY as the worker does (a real CONNECT proxy), not where NO_PROXY exempts the host; a bad HTTPS_PROXY is a configuration error naming it"
    )
    func environmentProxy() throws {
        let helper = WorkerCommand()
        let key = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        let directory = URL(fileURLWithPath: key).deletingLastPathComponent().path
        let simulator = try Simulator(directory: directory, keyFile: key)
        let proxy = try TinyProxy(username: "relay", password: "s3cret")
        defer { proxy.stop() }
        let arguments = [
            "send", "--host", "127.0.0.1", "--port", "\(simulator.port)", "--ca-file", directory + "/tls/ca.pem",
            "--key-file", key, "--team-id", "ABCDE12345", "--key-id", "KEY1234567", "--topic", "com.example.app",
            "--device-token", Self.token, "--payload", #"{"aps":{"alert":"hi"}}"#,
        ]
        let viaProxy = try helper.run(
            arguments,
            environment: ["HTTPS_PROXY": "http://relay:s3cret@127.0.0.1:\(proxy.port)", "NO_PROXY": "", "no_proxy": ""])
        #expect(viaProxy.status == 0, "\(viaProxy.stdout) \(viaProxy.stderr)")
        #expect(viaProxy.stdout.contains("outcome: delivered"), "\(viaProxy.stdout)")
        let tunnels = proxy.log.split(separator: "\n").filter { $0.contains("CONNECT") && $0.contains("Request") }
        #expect(tunnels.count == 1, "tinyproxy's CONNECTs: \(proxy.log.suffix(2000))")
        // NO_PROXY names the host: straight there, no second tunnel.
        let exempt = try helper.run(
            arguments,
            environment: ["HTTPS_PROXY": "http://relay:s3cret@127.0.0.1:\(proxy.port)", "NO_PROXY": "127.0.0.1"])
        #expect(exempt.status == 0, "\(exempt.stdout) \(exempt.stderr)")
        #expect(proxy.log.split(separator: "\n").filter { $0.contains("CONNECT") && $0.contains("Request") }.count == 1)
        let bad = try helper.run(arguments, environment: ["HTTPS_PROXY": "socks5://127.0.0.1:1", "NO_PROXY": ""])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("HTTPS_PROXY"), "\(bad.stderr)")
    }

    @Test("two credentials, an unknown flag, a bad --apns-id: usage errors (exit 2) that say so")
    func usageErrors() throws {
        let helper = WorkerCommand()
        let both = try helper.run([
            "send", "--key-file", "k.p8", "--cert-file", "c.pem", "--topic", "t", "--device-token", "ab", "--payload",
            "{}",
        ])
        #expect(both.status == 2)
        #expect(both.stderr.contains("give one credential"), "\(both.stderr)")
        let unknown = try helper.run(["send", "--bogus"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("Unknown option '--bogus'"), "\(unknown.stderr)")
        let apnsID = try helper.run([
            "send", "--key-file", "k.p8", "--topic", "t", "--device-token", "ab", "--payload", "{}", "--apns-id", "x",
        ])
        #expect(apnsID.status == 2)
        #expect(apnsID.stderr.contains("--apns-id must be a UUID"), "\(apnsID.stderr)")
    }

    @Test(
        "flags that would be ignored are usage errors (exit 2): --environment or --push-type with --event, --port without --host, an unset --password-env; an unreadable --event file exits 2"
    )
    func ignoredFlagsRefused() throws {
        let helper = WorkerCommand()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("send-flags-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let event = directory.appendingPathComponent("event.json").path
        try Data(
            #"{"id":"e1","deviceToken":"\#(Self.token)","topic":"com.example.app","pushType":"alert","payload":{"aps":{"alert":"hi"}}}"#
                .utf8
        ).write(to: URL(fileURLWithPath: event))
        // The event file says where it goes (production when it says nothing): a development flag
        // beside it used to be dropped without a word, and the push went to production.
        for flags in [["--environment", "development"], ["--push-type", "background"]] {
            let result = try helper.run(["send", "--key-file", "k.p8", "--event", event] + flags)
            #expect(result.status == 2, "\(flags)")
            #expect(result.stderr.contains(flags[0]), "\(flags): \(result.stderr)")
        }
        let unreadable = try helper.run(["send", "--key-file", "k.p8", "--event", directory.path + "/missing.json"])
        #expect(unreadable.status == 2)
        #expect(unreadable.stderr.contains("missing.json: cannot read the file"), "\(unreadable.stderr)")
        let unset = try helper.run([
            "send", "--p12-file", "c.p12", "--password-env", "APNS_WORKER_TEST_UNSET_VARIABLE", "--topic", "t",
            "--device-token", "ab", "--payload", "{}",
        ])
        #expect(unset.status == 2)
        #expect(unset.stderr.contains("APNS_WORKER_TEST_UNSET_VARIABLE is not set"), "\(unset.stderr)")
        let port = try helper.run([
            "channels", "list", "--bundle-id", "com.example.app", "--key-file", "k.p8", "--port", "1",
        ])
        #expect(port.status == 2)
        #expect(port.stderr.contains("--port"), "\(port.stderr)")
        // The bundle id goes into channel management's request path.
        let pathy = try helper.run(["channels", "list", "--bundle-id", "com.example/../x", "--key-file", "k.p8"])
        #expect(pathy.status == 2)
        #expect(pathy.stderr.contains("--bundle-id") && pathy.stderr.contains("letters, digits"), "\(pathy.stderr)")
    }

    @Test("channels create, get, list and delete against the simulator, as a table and as JSON; APNs' refusal exits 1")
    func channels() throws {
        let helper = WorkerCommand()
        let key = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        let directory = URL(fileURLWithPath: key).deletingLastPathComponent().path
        let simulator = try Simulator(directory: directory, keyFile: key)
        let common = [
            "--bundle-id", "com.example.app", "--host", "127.0.0.1", "--port", "\(simulator.managementPort)",
            "--ca-file", directory + "/tls/ca.pem", "--key-file", key, "--team-id", "ABCDE12345", "--key-id",
            "KEY1234567",
        ]
        let created = try helper.run(["channels", "create"] + common + ["--storage-policy", "1", "--json"])
        #expect(created.status == 0, "\(created.stderr)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(created.stdout.utf8)) as? [[String: Any]])
        let id = try #require(object.first?["channelId"] as? String)
        #expect(object.first?["messageStoragePolicy"] as? Int == 1)

        let shown = try helper.run(["channels", "get"] + common + ["--channel-id", id])
        #expect(shown.status == 0)
        #expect(shown.stdout.contains(id) && shown.stdout.contains("1 (most recent message stored)"), "\(shown.stdout)")
        let listed = try helper.run(["channels", "list"] + common)
        #expect(listed.stdout.contains(id))
        let deleted = try helper.run(["channels", "delete"] + common + ["--channel-id", id])
        #expect(deleted.status == 0 && deleted.stdout == "deleted \(id)\n")
        let again = try helper.run(["channels", "get"] + common + ["--channel-id", id])
        #expect(again.status == 1)
        #expect(again.stderr.contains("400 ChannelNotRegistered"), "\(again.stderr)")
    }

    @Test("send --channel-id broadcasts a Live Activity update to a channel; the worker's broadcast rules apply")
    func broadcast() throws {
        let helper = WorkerCommand()
        let key = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        let directory = URL(fileURLWithPath: key).deletingLastPathComponent().path
        let simulator = try Simulator(directory: directory, keyFile: key)
        let credential = [
            "--ca-file", directory + "/tls/ca.pem", "--key-file", key, "--team-id", "ABCDE12345", "--key-id",
            "KEY1234567",
        ]
        let created = try helper.run(
            [
                "channels", "create", "--bundle-id", "com.example.app", "--host", "127.0.0.1", "--port",
                "\(simulator.managementPort)", "--storage-policy", "0", "--json",
            ] + credential)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(created.stdout.utf8)) as? [[String: Any]], "\(created.stderr)")
        let channel = try #require(object.first?["channelId"] as? String)
        let update = #"{"aps":{"timestamp":1767225600,"event":"update","content-state":{"score":"1-0"}}}"#
        let common =
            [
                "send", "--host", "127.0.0.1", "--port", "\(simulator.port)", "--topic", "com.example.app",
                "--push-type",
                "liveactivity", "--channel-id", channel,
            ] + credential
        let sent = try helper.run(
            common + [
                "--priority", "10", "--expiration", "0", "--apns-id", "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
                "--payload", update,
            ])
        #expect(sent.status == 0, "\(sent.stdout) \(sent.stderr)")
        #expect(
            sent.stdout.contains("status: 200\napns-request-id: 0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9\n"),
            "\(sent.stdout)")
        #expect(sent.stdout.contains("apns-unique-id: "))
        #expect(sent.stdout.contains("outcome: delivered"))

        // Refused before sending, located as the worker locates it: a broadcast needs an expiration.
        let noExpiration = try helper.run(common + ["--priority", "10", "--payload", update])
        #expect(noExpiration.status == 1)
        #expect(
            noExpiration.stderr.contains("(root): required property 'expiration' is missing"), "\(noExpiration.stderr)")
        // APNs' answer: a channel that stores nothing takes expiration 0 only.
        let stored = try helper.run(common + ["--priority", "10", "--expiration", "4102444800", "--payload", update])
        #expect(stored.status == 1)
        #expect(stored.stdout.contains("reason: BadExpirationDate"), "\(stored.stdout)")
        // Both targets at once: a usage error.
        let both = try helper.run(common + ["--device-token", Self.token, "--payload", update])
        #expect(both.status == 2)
        #expect(both.stderr.contains("--device-token (or --channel-id)"), "\(both.stderr)")
    }
}
