import APNsSimulator
import Crypto
import Foundation
import Kafka
import Testing

/// `apns-worker check` as an operator runs it before a deploy, on the binary.
@Suite("apns-worker check (the binary)", .timeLimit(.minutes(1)))
struct CheckCommandTests {
    /// A configuration with one certificate credential valid over `validity`, and a broker that
    /// does not answer (said as a note, not a problem).
    func configuration(certificateValidFor validity: ClosedRange<Date>) throws -> String {
        let helper = WorkerCommand()
        let issued = try SimulatorCertificateAuthority().issueClientCertificate(
            topics: ["com.example.app"], validity: validity)
        let certificate = try helper.temporaryFile("cert.pem", try issued.certificatePEM)
        let key = try helper.temporaryFile("key.pem", issued.privateKeyPEM)
        // A private key as it should be kept (check warns about one every user may read).
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        return try helper.temporaryFile(
            "worker.yaml",
            """
            kafka:
              bootstrap.servers: "127.0.0.1:1"
            consumer:
              topics: [notifications]
            topics:
              results: results
              deadLetters: dead-letters
            apns:
              credentials:
                - name: shop
                  topics: ["com.example.app"]
                  certificate: { certificateFile: "\(certificate)", privateKeyFile: "\(key)" }
            """)
    }

    func check(_ path: String) throws -> WorkerCommand.Run {
        try WorkerCommand().run(["check", "--config", path, "--broker-timeout", "1"])
    }

    /// Whether a line of `text` starts with `prefix` (`error: `, `warning: `) and holds `part`.
    func line(_ text: String, _ prefix: String, _ part: String) -> Bool {
        text.split(separator: "\n").contains { $0.hasPrefix(prefix) && $0.contains(part) }
    }

    // A certificate valid 2020-01-01 to 2020-02-01 passed `check` (`valid`, exit 0), and nothing
    // said when a certificate expires.
    @Test("an expired certificate fails check, with its date; one not yet valid too")
    func expiredCertificate() throws {
        let january2020 = Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_580_515_200)
        let expired = try check(try configuration(certificateValidFor: january2020))
        #expect(expired.status == 2, "\(expired.stdout)\(expired.stderr)")
        #expect(
            line(
                expired.stderr, "error: ",
                ":10: apns.credentials[0] (shop): the certificate expired on 2020-02-01T00:00:00Z"),
            "\(expired.stderr)")
        #expect(expired.stderr.contains("renew it"))
        #expect(!expired.stdout.contains(": valid"))

        let start = Date().addingTimeInterval(5 * 86_400)
        let future = try check(try configuration(certificateValidFor: start...start.addingTimeInterval(365 * 86_400)))
        #expect(future.status == 2, "\(future.stderr)")
        #expect(
            line(future.stderr, "error: ", "apns.credentials[0] (shop): the certificate is not valid before"),
            "\(future.stderr)")
    }

    @Test("a certificate within 30 days of expiry passes with a warning; every certificate's expiry is in the summary")
    func expiresSoon() throws {
        let now = Date()
        let soon = try check(
            try configuration(
                certificateValidFor: now.addingTimeInterval(-300 * 86_400)...now.addingTimeInterval(10 * 86_400 + 3_600)
            ))
        #expect(soon.status == 0, "\(soon.stderr)")
        #expect(
            line(soon.stderr, "warning: ", "apns.credentials[0] (shop): the certificate expires on"), "\(soon.stderr)")
        #expect(soon.stderr.contains("(in 10 days)"), "\(soon.stderr)")
        #expect(soon.stdout.contains("certificate:  shop: the certificate expires on"), "\(soon.stdout)")

        let later = try check(
            try configuration(
                certificateValidFor: now.addingTimeInterval(-3_600)...now.addingTimeInterval(200 * 86_400)))
        #expect(later.status == 0, "\(later.stderr)")
        #expect(!later.stderr.contains("warning:"), "\(later.stderr)")
        #expect(later.stdout.contains("certificate:  shop: the certificate expires on"), "\(later.stdout)")
        #expect(later.stdout.contains("(in 199 days)") || later.stdout.contains("(in 200 days)"), "\(later.stdout)")
    }

    // Six mistakes in one file took four fix-and-rerun rounds: check stopped at the first problem,
    // and credentials and librdkafka properties came without a line.
    @Test("--strict turns a broker that does not answer into a failure (exit 2) with what to check; without it, exit 0")
    func strictGate() throws {
        let now = Date()
        let path = try configuration(
            certificateValidFor: now.addingTimeInterval(-86_400)...now.addingTimeInterval(365 * 86_400))
        let strict = try WorkerCommand().run([
            "check", "--strict", "--skip-apns", "--config", path, "--broker-timeout", "1",
        ])
        #expect(strict.status == 2, "\(strict.stdout)\(strict.stderr)")
        #expect(
            line(strict.stderr, "error: ", "broker 127.0.0.1:1 did not answer in 1s: ")
                && line(strict.stderr, "error: ", "check kafka.bootstrap.servers"), "\(strict.stderr)")
        #expect(strict.stderr.contains("not valid (1 problem(s))"), "\(strict.stderr)")
        let plain = try check(path)
        #expect(plain.status == 0, "\(plain.stdout)\(plain.stderr)")
        #expect(line(plain.stderr, "note: ", "did not answer"), "\(plain.stderr)")
    }

    // A team id and key APNs refuses passed the deploy gate; only `apns-worker send` by hand showed
    // the 403. The probe asks for the all-zero device token, which no device has: the simulator here
    // accepts any made-up token, and still delivers nothing.
    @Test(
        "--strict proves each credential against APNs: a key id APNs does not know fails naming the credential; the right one passes; nothing is delivered"
    )
    func strictProvesCredentials() throws {
        let helper = WorkerCommand()
        let key = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        let directory = URL(fileURLWithPath: key).deletingLastPathComponent().path
        let simulator = try SendCommandTests.Simulator(directory: directory, keyFile: key)
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["notifications", "results", "dead-letters"] { try cluster.createTopic(topic, partitions: 1) }
        func configuration(keyID: String) throws -> String {
            try helper.temporaryFile(
                "worker-\(keyID).yaml",
                """
                kafka:
                  bootstrap.servers: "\(cluster.bootstrapServers)"
                consumer:
                  topics: [notifications]
                topics:
                  results: results
                  deadLetters: dead-letters
                apns:
                  caFile: "\(directory)/tls/ca.pem"
                  endpoints:
                    production: { host: 127.0.0.1, port: \(simulator.port) }
                  credentials:
                    - name: shop
                      topics: ["com.example.*", "com.example.app"]
                      token: { teamId: ABCDE12345, keyId: \(keyID), keyFile: "\(key)" }
                """)
        }
        let right = try helper.run(["check", "--strict", "--config", try configuration(keyID: "KEY1234567")])
        #expect(right.status == 0, "\(right.stdout)\(right.stderr)")
        #expect(
            right.stdout.contains(
                "apns:         shop (production, com.example.app): accepted; APNs answered 400 BadDeviceToken"),
            "\(right.stdout)")
        let wrong = try helper.run(["check", "--strict", "--config", try configuration(keyID: "WRONGKEY12")])
        #expect(wrong.status == 2, "\(wrong.stdout)\(wrong.stderr.suffix(6000))")
        #expect(
            line(
                wrong.stderr, "error: ",
                "apns.credentials[0] (shop): APNs (production) refused credential shop for com.example.app: 403 InvalidProviderToken"
            ),
            "\(wrong.stderr)")
        #expect(wrong.stderr.contains("not valid (1 problem(s))"), "\(wrong.stderr)")
        let skipped = try helper.run([
            "check", "--strict", "--skip-apns", "--config", try configuration(keyID: "WRONGKEY12"),
        ])
        #expect(skipped.status == 0, "--skip-apns leaves APNs out: \(skipped.stderr)")
        _ = simulator
    }

    @Test("six mistakes in one file: check lists all six in one run, each with file:line, in plain words")
    func everyProblemAtOnce() throws {
        let helper = WorkerCommand()
        let goodKey = try helper.temporaryFile("AuthKey.p8", P256.Signing.PrivateKey().pemRepresentation)
        let missingKey = goodKey + ".missing"
        let path = try helper.temporaryFile(
            "worker.yaml",
            """
            kafka:
              bootstrap.servers: "127.0.0.1:1"
              sasl.mechanisms.typo: PLAIN
              linger.ms: soon
            consumer:
              topics: [notifications]
            topics:
              results: results
              deadLetters: dead-letters
            apns:
              credentials:
                - name: shop
                  topics: ["com.example.shop"]
                  token: { teamId: ABCDE12345, keyId: KEY1234567, keyFile: "\(missingKey)" }
                - name: news
                  topics: ["com.example.news"]
                  token: { teamId: news, keyId: KEY1234567, keyFile: "\(goodKey)" }
            delivery:
              maxAtempts: 3
            http:
              port: 99999
            """)
        let run = try WorkerCommand().run(["check", "--config", path, "--broker-timeout", "1"])
        #expect(run.status == 2, "\(run.stderr)")
        let errors = run.stderr.split(separator: "\n").filter { $0.hasPrefix("error: ") }.map(String.init)
        #expect(errors.count == 6, "\(run.stderr)")
        #expect(run.stderr.contains("not valid (6 problem(s))"), "\(run.stderr)")
        for (line, expected) in [
            (3, "kafka.sasl.mechanisms.typo: librdkafka refused it"),
            (4, "kafka.linger.ms: librdkafka refused it"),
            (12, "apns.credentials[0] (shop): cannot open \(missingKey): No such file or directory"),
            (15, "apns.credentials[1] (news): the team id must be 10 letters or digits"),
            (19, "delivery.maxAtempts: unknown key"),  // (no suggestion: delivery has no maxAttempts)
            (21, "http.port: expected an integer from 0 to 65535"),
        ] {
            #expect(
                errors.contains { $0.hasPrefix("error: \(path):\(line): \(expected)") },
                "line \(line): \(expected)\n\(run.stderr)")
        }
        for internalName in ["fileUnreadable", "badIdentifier", "keyUnreadable", "invalidValue", "unknownKey"] {
            #expect(!run.stderr.contains(internalName), "\(internalName) in \(run.stderr)")
        }
        // Fixed, the same file passes.
        let fixed = try String(contentsOfFile: path, encoding: .utf8)
            .replacingOccurrences(of: "  sasl.mechanisms.typo: PLAIN\n", with: "")
            .replacingOccurrences(of: "soon", with: "5")
            .replacingOccurrences(of: missingKey, with: goodKey)
            .replacingOccurrences(of: "teamId: news", with: "teamId: FGHIJ67890")
            .replacingOccurrences(of: "maxAtempts: 3", with: "maxInFlight: 100")
            .replacingOccurrences(of: "99999", with: "0")
        try fixed.write(toFile: path, atomically: true, encoding: .utf8)
        let valid = try WorkerCommand().run(["check", "--config", path, "--broker-timeout", "1"])
        #expect(valid.status == 0, "\(valid.stderr)")
    }

    @Test("run lists every problem of the file too, and exits 2 before starting")
    func runListsEveryProblem() throws {
        let path = try WorkerCommand().temporaryFile(
            "worker.yaml",
            """
            kafka:
              bootstrap.servers: "127.0.0.1:1"
            consumer:
              topics: [notifications]
              bufferCapacity: none
            topics:
              results: results
              deadLetters: dead-letters
            apns:
              requestTimeout: soon
              credentials:
                - name: shop
                  topics: ["com.example.shop"]
                  token: { teamId: ABCDE12345, keyId: KEY1234567, keyFile: /nonexistent.p8 }
            """)
        let run = try WorkerCommand().run(["run", "--config", path])
        #expect(run.status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("\(path):5: consumer.bufferCapacity: expected an integer"), "\(run.stderr)")
        #expect(run.stderr.contains("\(path):10: apns.requestTimeout: expected a positive duration"), "\(run.stderr)")
    }
}
