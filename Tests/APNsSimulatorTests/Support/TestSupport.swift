import APNsSimulator
import Crypto
import Foundation
import TestPeers
import NIOConcurrencyHelpers

/// A provider token signing key made for the test run (never committed), and JWTs signed with it.
struct TestSigningKey: Sendable {
    let teamID: String
    let keyID: String
    let privateKey = P256.Signing.PrivateKey()
    /// The token a well-behaved client reuses (ECDSA signatures differ each time, and the simulator
    /// counts every different token as an update).
    private(set) var current: String

    init(teamID: String = "TEAM123456", keyID: String = "KEY1234567") {
        self.teamID = teamID
        self.keyID = keyID
        self.current = ""
        self.current = authorization(iat: Date().timeIntervalSince1970)
    }

    /// The reused token.
    func authorization() -> String { current }

    var p8: String { privateKey.pemRepresentation }

    func trusted(topics: Set<String>? = nil) -> ProviderTokenKey {
        ProviderTokenKey(teamID: teamID, keyID: keyID, publicKey: privateKey.publicKey, topics: topics)
    }

    /// `bearer <ES256 JWT>` issued at `iat` (seconds since 1970).
    /// A newly signed token.
    func authorization(iat: Double, kid: String? = nil, iss: String? = nil) -> String {
        let header = #"{"alg":"ES256","kid":"\#(kid ?? keyID)"}"#
        let claims = #"{"iss":"\#(iss ?? teamID)","iat":\#(Int(iat))}"#
        let input = b64(Data(header.utf8)) + "." + b64(Data(claims.utf8))
        let signature = try! privateKey.signature(for: Data(input.utf8)).rawRepresentation
        return "bearer " + input + "." + b64(signature)
    }

    private func b64(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// A scratch directory removed at the end of the test.
struct TemporaryDirectory: ~Copyable {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "apns-sim-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func write(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }
}

enum Fixture {
    static let topic = "com.example.app"
    static let device = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0"
    static let otherTopicDevice = "aa11"
    static let goneDevice = "bb22"
    static let goneSince: Double = 1_700_000_000
    static let payload = #"{"aps":{"alert":"Hello"}}"#
}

/// Starts a simulator with generated TLS material in a scratch directory, runs `body`, shuts it down.
func withSimulator<T>(
    key: TestSigningKey = TestSigningKey(),
    _ adjust: (inout SimulatorConfiguration) throws -> Void = { _ in },
    _ body: (Simulator, String) async throws -> T
) async throws -> T {
    let dir = try TemporaryDirectory()
    var config = SimulatorConfiguration(tls: .directory(dir.path + "/tls"))
    config.threads = 1
    config.tokenKeys = [key.trusted()]
    config.devices = [
        Fixture.device: DeviceRegistry.Device(topic: Fixture.topic),
        Fixture.otherTopicDevice: DeviceRegistry.Device(topic: "com.example.other"),
    ]
    config.unregisteredDevices = [Fixture.goneDevice: Fixture.goneSince]
    try adjust(&config)
    let simulator = try await Simulator.start(config)
    do {
        let result = try await body(simulator, dir.path)
        try await simulator.shutdown()
        return result
    } catch {
        try? await simulator.shutdown()
        throw error
    }
}

/// The output of a finished process.
struct ProcessOutput {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a program to completion (killed after `timeout` seconds) and collects its output
/// (`spawnAndAwait`: Foundation's `Process` is avoided, see `spawnAndWait`).
func run(_ executable: String, _ arguments: [String], timeout: Double = 60) async throws -> ProcessOutput {
    let program = try await spawnAndAwait(executable, arguments, timeout: timeout)
    return ProcessOutput(status: program.status, stdout: program.stdout, stderr: program.stderr)
}

/// Polls until `condition` holds or `timeout` passes.
func eventually(timeout: Double = 10, _ condition: () -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        try await Task.sleep(for: .milliseconds(10))
    }
    return true
}
