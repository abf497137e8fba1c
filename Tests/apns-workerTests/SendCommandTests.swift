import Crypto
import Foundation
import Testing

/// `apns-worker send` against the `apns-simulator` binary, both started here as a user would.
@Suite("apns-worker send (the binary, against apns-simulator)", .timeLimit(.minutes(1)))
struct SendCommandTests {
    static let token = String(repeating: "ab", count: 32)
    static let goneToken = String(repeating: "cd", count: 32)

    /// The simulator, listening on a free port with its CA in `directory/tls`.
    final class Simulator {
        let process = Process()
        let port: Int
        /// The channel-management listener (the startup output's second line).
        let managementPort: Int

        init(directory: String, keyFile: String) throws {
            let binary = ValidateCommandTests.binary.deletingLastPathComponent().appendingPathComponent(
                "apns-simulator")
            process.executableURL = binary
            process.arguments = [
                "--port", "0", "--tls-dir", directory + "/tls", "--token-key", "ABCDE12345:KEY1234567:\(keyFile)",
                "--accept-any-device", "--unregistered", "\(SendCommandTests.goneToken)=1700000000",
            ]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            var output = Data()
            while output.filter({ $0 == UInt8(ascii: "\n") }).count < 2 {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                output.append(chunk)
            }
            let lines = String(decoding: output, as: UTF8.self).split(separator: "\n")
            let first = lines.first ?? ""
            port = try #require(Int(first.split(separator: ":").last ?? ""), "simulator said: \(first)")
            let second = lines.dropFirst().first ?? ""
            managementPort = try #require(
                second.hasPrefix("managing channels on") ? Int(second.split(separator: ":").last ?? "") : nil,
                "simulator said: \(second)")
        }

        deinit { if process.isRunning { process.terminate() } }
    }

    @Test("answers print readably: delivered, unregistered with its time; the worker's event rules apply to flags")
    func readableOutcomes() throws {
        let helper = ValidateCommandTests()
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

    @Test("two credentials, an unknown flag, a bad --apns-id: usage errors (exit 2) that say so")
    func usageErrors() throws {
        let helper = ValidateCommandTests()
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

    @Test("channels create, get, list and delete against the simulator, as a table and as JSON; APNs' refusal exits 1")
    func channels() throws {
        let helper = ValidateCommandTests()
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
}
