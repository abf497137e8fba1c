import APNs
import Foundation
import TestPeers
import Testing

@testable import Worker

/// Certificate credentials as the configuration names them: a PEM certificate with an encrypted or
/// a plain key, `passwordEnv` read only when it is set. The key pair is made here by openssl.
@Suite("Certificate credentials: passwordEnv")
struct CertificateCredentialTests {
    /// A self-signed P-256 certificate and its key, encrypted with `password` when given.
    static func makeIdentity(in directory: URL, password: String?) async throws -> (certificate: String, key: String) {
        let certificate = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let openssl = try await spawnAndAwait(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout", key, "-out",
                certificate, "-days", "1", "-subj", "/CN=Apple Push Services: com.example.app",
            ] + (password.map { ["-passout", "pass:\($0)"] } ?? ["-noenc"]))
        try #require(openssl.status == 0, "\(openssl.stderr)")
        return (certificate, key)
    }

    static func settings(_ identity: (certificate: String, key: String), passwordEnv: String?) -> CredentialSettings {
        CredentialSettings(
            name: "app", topics: ["com.example.app"],
            kind: .certificate(
                CertificateCredentialSettings(
                    source: .pem(certificateFile: identity.certificate, privateKeyFile: identity.key),
                    passwordEnvironmentVariable: passwordEnv)))
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("an encrypted PEM key opens with the password from passwordEnv, and says which variable is missing")
    func encryptedKey() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let identity = try await Self.makeIdentity(in: directory, password: "s3cret")
        let settings = Self.settings(identity, passwordEnv: "APNS_KEY_PASSWORD")
        _ = try APNsSender.load(settings, environment: ["APNS_KEY_PASSWORD": "s3cret"])

        let missing = #expect(throws: APNsCredentialError.self) { try APNsSender.load(settings, environment: [:]) }
        #expect(
            missing?.message.contains("APNS_KEY_PASSWORD, which is not set") == true, "\(String(describing: missing))")
        let wrong = #expect(throws: APNsCredentialError.self) {
            try APNsSender.load(settings, environment: ["APNS_KEY_PASSWORD": "nope"])
        }
        #expect("\(String(describing: wrong))".contains("wrong password"))
        #expect(!"\(String(describing: wrong))".contains("nope"), "the password is never printed")
    }

    @Test("a plain PEM key loads without the variable, even when passwordEnv names one")
    func plainKey() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let identity = try await Self.makeIdentity(in: directory, password: nil)
        _ = try APNsSender.load(Self.settings(identity, passwordEnv: "APNS_KEY_PASSWORD"), environment: [:])
        _ = try APNsSender.load(Self.settings(identity, passwordEnv: nil), environment: [:])
    }

    @Test("a credential scoped to one environment serves only that one; the next match serves the other")
    func environmentScope() throws {
        let sandbox = CredentialSettings(
            name: "sandbox", topics: ["com.example.app"],
            kind: .token(TokenCredentialSettings(teamID: "T", keyID: "K", key: .file("x"))), environment: .development)
        let production = CredentialSettings(
            name: "production", topics: ["com.example.app"],
            kind: .token(TokenCredentialSettings(teamID: "T", keyID: "K", key: .file("y"))))
        let apns = APNsSettings(credentials: [sandbox, production])
        #expect(apns.credential(forTopic: "com.example.app", environment: .development)?.name == "sandbox")
        #expect(apns.credential(forTopic: "com.example.app", environment: .production)?.name == "production")
        let yaml = ConfigurationFixtures.fullYAML
        let line = try #require(
            yaml.split(separator: "\n").first { $0.hasSuffix(#"topics: ["com.example.app", "com.example.app.*"]"#) }
                .map(String.init))
        let indent = String(line.prefix { $0 == " " })
        let parsed = try WorkerConfiguration.parse(
            yaml.replacingOccurrences(of: line, with: line + "\n" + indent + "environment: development"))
        #expect(parsed.apns.credentials.first?.environment == .development)
        #expect(throws: ConfigurationError.self) {
            try WorkerConfiguration.parse(
                yaml.replacingOccurrences(of: line, with: line + "\n" + indent + "environment: sandbox"))
        }
    }
}
