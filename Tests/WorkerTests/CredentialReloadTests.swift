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

/// One token credential read from files under one or more senders (the lanes'), a reloader over
/// them, and what an operator sees: the key id in use, the reload series, readiness, the log.
private struct ReloadRig {
    let directory: URL
    let keyFile: URL
    let idFile: URL
    let settings: APNsSettings
    let authenticators = TokenAuthenticators()
    let senders: [APNsSender]
    let registry = PrometheusCollectorRegistry()
    let metrics: WorkerMetrics
    let health = HealthState()
    let log = CapturedLog()
    let reloader: CredentialReloader

    /// - Parameters:
    ///   - fixedKeyID: `keyId` given as a value in the configuration, else read from `keyIdFile`.
    ///   - caFile: the APNs trust's extra CA file; the endpoints are a closed loopback port.
    init(key: [UInt8], keyID: String, fixedKeyID: Bool, lanes: Int = 1, caFile: String? = nil) throws {
        directory = try CertificateCredentialTests.temporaryDirectory()
        keyFile = directory.appendingPathComponent("AuthKey.p8")
        idFile = directory.appendingPathComponent("key-id")
        try Data(key).write(to: keyFile)
        try Data("\(keyID)\n".utf8).write(to: idFile)
        var settings = APNsSettings(credentials: [
            CredentialSettings(
                name: "app", topics: ["com.example.app"],
                kind: .token(
                    TokenCredentialSettings(
                        teamID: "TEAM123456", keyID: fixedKeyID ? .value(keyID) : .file(idFile.path),
                        key: .file(keyFile.path))))
        ])
        settings.caFile = caFile
        settings.endpoints.production = .init(host: "127.0.0.1", port: 9)
        settings.endpoints.development = .init(host: "127.0.0.1", port: 9)
        settings.connectionsPerCredential = 1
        self.settings = settings
        let authenticators = self.authenticators
        let log = self.log
        senders = try (0..<lanes).map { _ in
            try APNsSender(settings: settings, environment: [:], authenticators: authenticators, logger: log.logger())
        }
        metrics = WorkerMetrics(registry: registry)
        reloader = CredentialReloader(
            settings: settings, interval: .seconds(1), senders: senders, environment: [:],
            authenticators: authenticators, metrics: metrics, health: health,
            observer: OperationsObserver(metrics: metrics, health: health), logger: log.logger())
    }

    /// The authenticator each sender uses now.
    var inUse: [APNsTokenAuthenticator] {
        senders.compactMap { sender in
            if case .token(let tokens) = sender.credential(at: 0) { return tokens }
            return nil
        }
    }

    func series(_ result: String) -> String {
        metric(#"apns_worker_credential_reloads_total{credential="app",result="\#(result)"}"#)
    }

    /// A series' value in the registry's text, "absent" when it is not there.
    func metric(_ series: String) -> String {
        var bytes: [UInt8] = []
        registry.emit(into: &bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix(series + " ") }
            .map { String($0.dropFirst(series.count + 1)) } ?? "absent"
    }

    /// Two readings: a change is loaded once it reads the same twice.
    func settle() {
        reloader.check()
        reloader.check()
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

extension CredentialReloaderTests {
    /// Two P-256 keys made now, and the scratch directory holding them (`a.p8`, `b.p8`).
    static func twoKeys() async throws -> (scratch: URL, first: [UInt8], second: [UInt8]) {
        let scratch = try CertificateCredentialTests.temporaryDirectory()
        return (scratch, try await key(in: scratch, name: "a.p8"), try await key(in: scratch, name: "b.p8"))
    }

    // An operator who updates the Secret before the ConfigMap: the key file holds the new key while
    // the configuration still names the old id. It was loaded: APNs refused the new key under the old
    // id (403 InvalidProviderToken) on every connection replaced after it, until a restart.
    @Test(
        "keyId fixed in the configuration, the key file replaced by another key: refused, said once, the old key stays")
    func newKeyUnderFixedID() async throws {
        let (scratch, first, second) = try await Self.twoKeys()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let rig = try ReloadRig(key: first, keyID: "KEYAAAAAAA", fixedKeyID: true)
        defer { rig.remove() }
        let original = try #require(rig.inUse.first)

        try Data(second).write(to: rig.keyFile)
        rig.settle()
        rig.settle()
        #expect(rig.inUse.first === original, "the key loaded at start stays in use")
        #expect(rig.series("failure") == "1" && rig.series("success") == "0", "counted once over four readings")
        #expect(rig.metric(#"apns_worker_credential_reload_failing{credential="app"}"#) == "1.0")
        let problem = rig.health.readiness.credentialFiles
        #expect(problem.contains("keyId is fixed to KEYAAAAAAA") && problem.contains("keyIdFile"), "\(problem)")
        #expect(rig.log.lines.filter { $0.contains("InvalidProviderToken") }.count == 1)

        // The same key in other PEM text (SEC 1 instead of PKCS#8) is no new key: it loads.
        let sec1 = scratch.appendingPathComponent("a-sec1.pem").path
        let converted = try await spawnAndAwait(
            "/usr/bin/openssl", ["ec", "-in", scratch.appendingPathComponent("a.p8").path, "-out", sec1])
        try #require(converted.status == 0, "\(converted.stderr)")
        try FileManager.default.copyItem(atPath: sec1, toPath: rig.keyFile.path + ".sec1")
        try FileManager.default.removeItem(at: rig.keyFile)
        try FileManager.default.moveItem(atPath: rig.keyFile.path + ".sec1", toPath: rig.keyFile.path)
        rig.settle()
        #expect(rig.series("success") == "1")
        #expect(rig.inUse.first?.hasSameKey(as: original) == true)
        #expect(rig.health.readiness.credentialFiles == "ok")
    }

    // A key APNs refused stayed "broken" (gauge 1, named in readiness) after its fix was reloaded,
    // until the credential's next push: a quiet app's fixed key looked broken for hours.
    @Test("a credential APNs refused, its new key and id reloaded: healthy at once (gauge 0, readiness ok)")
    func reloadClearsBroken() async throws {
        let (scratch, first, second) = try await Self.twoKeys()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let rig = try ReloadRig(key: first, keyID: "KEYAAAAAAA", fixedKeyID: false)
        defer { rig.remove() }
        rig.metrics.register(credential: "app")
        OperationsObserver(metrics: rig.metrics, health: rig.health).credentialBroken(
            "app", reason: "InvalidProviderToken")
        #expect(rig.metric(#"apns_worker_credentials_broken{credential="app"}"#) == "1.0")
        #expect(rig.health.readiness.credentials.contains("app: InvalidProviderToken"))
        try Data(second).write(to: rig.keyFile)
        try Data("KEYBBBBBBB\n".utf8).write(to: rig.idFile)
        rig.settle()
        #expect(rig.inUse.first?.keyID == "KEYBBBBBBB")
        #expect(rig.metric(#"apns_worker_credentials_broken{credential="app"}"#) == "0.0")
        #expect(rig.health.readiness.credentials == "ok")
    }

    // The pool's lines (a connection replaced after a reload, one that failed to connect) did not
    // say whose connection it was: a pod with several apps could not tell which one's.
    @Test("the lines a credential's connections log name the credential and environment")
    func clientLinesNameTheCredential() async throws {
        let (scratch, first, _) = try await Self.twoKeys()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let rig = try ReloadRig(key: first, keyID: "KEYAAAAAAA", fixedKeyID: false)
        defer { rig.remove() }
        rig.senders[0].connect()  // to a closed port: its connections fail and say so
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, !rig.log.all.contains(where: { $0.message == "connect failed" }) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let failed = try #require(rig.log.all.first { $0.message == "connect failed" })
        #expect(failed.metadata["credential"] == "app")
        #expect(failed.metadata["environment"] == "production")
        await rig.senders[0].shutdown()
    }

    @Test("keyIdFile unchanged while the key file holds another key: refused the same way")
    func newKeyUnderUnchangedIDFile() async throws {
        let (scratch, first, second) = try await Self.twoKeys()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let rig = try ReloadRig(key: first, keyID: "KEYAAAAAAA", fixedKeyID: false)
        defer { rig.remove() }
        let original = try #require(rig.inUse.first)
        try Data(second).write(to: rig.keyFile)
        rig.settle()
        #expect(rig.inUse.first === original)
        #expect(rig.series("failure") == "1")
        #expect(rig.health.readiness.credentialFiles.contains("keyIdFile \(rig.idFile.path) still says KEYAAAAAAA"))
        // Then the id follows (the rest of the Secret's update): the new key and id in use.
        try Data("KEYBBBBBBB\n".utf8).write(to: rig.idFile)
        rig.settle()
        #expect(rig.inUse.first?.keyID == "KEYBBBBBBB")
        #expect(rig.series("success") == "1")
    }

    // Each lane's sender was switched in turn: when a later one could not take the new credential,
    // the earlier ones kept it (lanes on different keys), and the files were marked failed, so the
    // switch was never tried again until they changed.
    @Test("a switch that fails for one lane leaves every lane on the key before, and is tried again")
    func allLanesOrNone() async throws {
        let (scratch, first, second) = try await Self.twoKeys()
        defer { try? FileManager.default.removeItem(at: scratch) }
        // An extra CA for the APNs trust (any certificate will do).
        let caFile = scratch.appendingPathComponent("ca.pem").path
        let made = try await spawnAndAwait(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-key", scratch.appendingPathComponent("a.p8").path, "-subj", "/CN=test CA",
                "-days", "1", "-out", caFile,
            ])
        try #require(made.status == 0, "\(made.stderr)")
        let rig = try ReloadRig(key: first, keyID: "KEYAAAAAAA", fixedKeyID: false, lanes: 2, caFile: caFile)
        defer { rig.remove() }
        // The second lane has a client (connections to a closed port, backing off); the first none.
        rig.senders[1].connect()
        let ca = try Data(contentsOf: URL(fileURLWithPath: caFile))
        try FileManager.default.removeItem(atPath: caFile)  // its TLS context cannot be made now

        try Data(second).write(to: rig.keyFile)
        try Data("KEYBBBBBBB\n".utf8).write(to: rig.idFile)
        rig.settle()
        #expect(rig.inUse.map(\.keyID) == ["KEYAAAAAAA", "KEYAAAAAAA"], "both lanes on the key before")
        #expect(rig.series("failure") == "1")
        #expect(rig.health.readiness.credentialFiles.contains("cannot be put in use"))
        rig.settle()
        #expect(rig.series("failure") == "1", "said once while the reason lasts")

        try ca.write(to: URL(fileURLWithPath: caFile))
        rig.settle()
        #expect(rig.inUse.map(\.keyID) == ["KEYBBBBBBB", "KEYBBBBBBB"], "tried again: both lanes on the new key")
        #expect(rig.series("success") == "1")
        #expect(rig.health.readiness.credentialFiles == "ok")
        for sender in rig.senders { await sender.shutdown() }
    }

    // Every authenticator made was kept for the life of the process: each rotated-away (possibly
    // revoked) private key stayed in memory, and its key id's series never left /metrics.
    @Test("a key rotated away is dropped once nothing uses it: its key freed, its key id's series gone")
    func rotatedKeyDropped() async throws {
        let (scratch, first, second) = try await Self.twoKeys()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let rig = try ReloadRig(key: first, keyID: "KEYAAAAAAA", fixedKeyID: false)
        defer { rig.remove() }
        weak let original = rig.inUse.first
        _ = try original?.currentToken()
        rig.metrics.setProviderTokens(of: rig.authenticators)
        #expect(rig.metric(#"apns_worker_apns_provider_tokens_signed_total{key_id="KEYAAAAAAA"}"#) == "1")

        try Data(second).write(to: rig.keyFile)
        try Data("KEYBBBBBBB\n".utf8).write(to: rig.idFile)
        rig.settle()
        #expect(rig.inUse.first?.keyID == "KEYBBBBBBB")
        rig.metrics.setProviderTokens(of: rig.authenticators)
        #expect(original == nil, "the old key's authenticator (and its private key) freed")
        #expect(rig.authenticators.count == 1)
        #expect(rig.metric(#"apns_worker_apns_provider_tokens_signed_total{key_id="KEYAAAAAAA"}"#) == "absent")
        #expect(rig.metric(#"apns_worker_apns_provider_tokens_signed_total{key_id="KEYBBBBBBB"}"#) == "0")
    }
}
