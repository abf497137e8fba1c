import APNs
import Foundation
import Prometheus
import TestPeers
import Testing

@testable import Worker

/// The reloader's rules, fed readings: what is loaded, when, and what is reported once.
@Suite("Credential files: when a change is loaded")
struct CredentialFileWatchTests {
    let a = CredentialFiles(["/k": Array("key A".utf8)])
    let b = CredentialFiles(["/k": Array("key B".utf8)])
    let half = CredentialFiles(["/k": Array("key".utf8)])

    @Test("files as loaded: nothing; changed files load once two readings agree, not at the first")
    func settlesBeforeLoading() {
        var watch = CredentialFileWatch(inUse: a)
        #expect(watch.observe(.files(a)) == .none)
        #expect(watch.observe(.files(half)) == .none, "a file caught half-written is not loaded")
        #expect(watch.observe(.files(b)) == .none, "nor one that just changed again")
        #expect(watch.observe(.files(b)) == .load(b))
        watch.loaded(b)
        #expect(watch.inUse == b && watch.problem == nil)
        #expect(watch.observe(.files(b)) == .none)
    }

    @Test("contents that do not load are reported once, not at every reading, until the files change or come back")
    func failureReportedOnce() {
        var watch = CredentialFileWatch(inUse: a)
        _ = watch.observe(.files(half))
        #expect(watch.observe(.files(half)) == .load(half))
        watch.failed(half, why: "not a PEM private key")
        #expect(watch.problem == "not a PEM private key")
        #expect(watch.observe(.files(half)) == .none, "reported once")
        #expect(watch.observe(.unreadable("cannot open /k: No such file or directory")) == .none)
        #expect(
            watch.observe(.unreadable("cannot open /k: No such file or directory"))
                == .unreadable("cannot open /k: No such file or directory"))
        #expect(watch.observe(.unreadable("cannot open /k: No such file or directory")) == .none, "once")
        #expect(watch.observe(.files(a)) == .restored, "back to the files in use: the problem is over")
        #expect(watch.problem == nil)
        #expect(watch.observe(.files(a)) == .none)
    }
}

/// The reloader on real files under a sender, as `run` assembles them: a key replaced by something
/// that does not load, then by a new key and its id.
@Suite("Credential files: reloaded under a running sender")
struct CredentialReloaderTests {
    static func key(curve: String = "P-256", in directory: URL, name: String) async throws -> [UInt8] {
        let path = directory.appendingPathComponent(name).path
        let openssl = try await spawnAndAwait(
            "/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:\(curve)", "-out", path])
        try #require(openssl.status == 0, "\(openssl.stderr)")
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test(
        "a key file half-written, of the wrong curve, then missing: each logged and counted once, the key before in use, the worker ready; then a new key and id: in use"
    )
    func rotation() async throws {
        let directory = try CertificateCredentialTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("AuthKey.p8")
        let idFile = directory.appendingPathComponent("key-id")
        let first = try await Self.key(in: directory, name: "a.p8")
        let second = try await Self.key(in: directory, name: "b.p8")
        let wrongCurve = try await Self.key(curve: "P-384", in: directory, name: "c.p8")
        try Data(first).write(to: keyFile)
        try Data("KEYAAAAAAA\n".utf8).write(to: idFile)
        let settings = APNsSettings(credentials: [
            CredentialSettings(
                name: "app", topics: ["com.example.app"],
                kind: .token(
                    TokenCredentialSettings(teamID: "TEAM123456", keyID: .file(idFile.path), key: .file(keyFile.path))))
        ])
        let authenticators = TokenAuthenticators()
        let sender = try APNsSender(settings: settings, environment: [:], authenticators: authenticators)
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        let health = HealthState()
        let log = CapturedLog()
        let reloader = CredentialReloader(
            settings: settings, interval: .seconds(1), senders: [sender], environment: [:],
            authenticators: authenticators, metrics: metrics, health: health,
            observer: OperationsObserver(metrics: metrics, health: health), logger: log.logger())
        func keyID() -> String? {
            if case .token(let tokens) = sender.credential(at: 0) { return tokens.keyID }
            return nil
        }
        func series(_ result: String) -> String {
            var bytes: [UInt8] = []
            registry.emit(into: &bytes)
            let text = String(decoding: bytes, as: UTF8.self)
            let prefix = #"apns_worker_credential_reloads_total{credential="app",result="\#(result)"} "#
            return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
                ?? "absent"
        }
        /// Two readings: a change is loaded once it reads the same twice.
        func settle() {
            reloader.check()
            reloader.check()
        }
        #expect(keyID() == "KEYAAAAAAA")
        settle()
        #expect(series("success") == "0" && series("failure") == "0")
        #expect(health.readiness.credentialFiles == "ok")

        try Data(first.prefix(60)).write(to: keyFile)
        settle()
        settle()
        #expect(series("failure") == "1", "half-written: counted once over four readings")
        #expect(keyID() == "KEYAAAAAAA", "the key before stays in use")
        #expect(health.readiness.credentials == "ok", "ready as far as credentials go")
        #expect(health.readiness.credentialFiles.contains("app: the new files do not load"))

        try Data(wrongCurve).write(to: keyFile)
        settle()
        #expect(series("failure") == "2")
        #expect(health.readiness.credentialFiles.contains("P-256"), "\(health.readiness.credentialFiles)")

        try FileManager.default.removeItem(at: keyFile)
        settle()
        #expect(series("failure") == "3")
        #expect(health.readiness.credentialFiles.contains("No such file or directory"))
        #expect(keyID() == "KEYAAAAAAA")

        try Data(second).write(to: keyFile)
        try Data("KEYBBBBBBB".utf8).write(to: idFile)
        settle()
        #expect(series("success") == "1" && series("failure") == "3")
        #expect(keyID() == "KEYBBBBBBB", "the new key and its id in use")
        #expect(health.readiness.credentialFiles == "ok")
        let said = log.lines.joined(separator: "\n")
        #expect(said.contains("credential app: reloaded from its files (key id KEYBBBBBBB)"))
        #expect(!said.contains("BEGIN PRIVATE KEY"), "no key text in the log")
    }
}
