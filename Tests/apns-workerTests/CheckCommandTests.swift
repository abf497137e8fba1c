import APNsSimulator
import Foundation
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

    // A certificate valid 2020-01-01 to 2020-02-01 passed `check` (`valid`, exit 0), and nothing
    // said when a certificate expires.
    @Test("an expired certificate fails check, with its date; one not yet valid too")
    func expiredCertificate() throws {
        let january2020 = Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_580_515_200)
        let expired = try check(try configuration(certificateValidFor: january2020))
        #expect(expired.status == 2, "\(expired.stdout)\(expired.stderr)")
        #expect(
            expired.stderr.contains(
                "error: credential shop: the certificate expired on 2020-02-01T00:00:00Z"),
            "\(expired.stderr)")
        #expect(expired.stderr.contains("renew it"))
        #expect(!expired.stdout.contains(": valid"))

        let start = Date().addingTimeInterval(5 * 86_400)
        let future = try check(try configuration(certificateValidFor: start...start.addingTimeInterval(365 * 86_400)))
        #expect(future.status == 2, "\(future.stderr)")
        #expect(
            future.stderr.contains("error: credential shop: the certificate is not valid before"), "\(future.stderr)")
    }

    @Test("a certificate within 30 days of expiry passes with a warning; every certificate's expiry is in the summary")
    func expiresSoon() throws {
        let now = Date()
        let soon = try check(
            try configuration(
                certificateValidFor: now.addingTimeInterval(-300 * 86_400)...now.addingTimeInterval(10 * 86_400 + 3_600)
            ))
        #expect(soon.status == 0, "\(soon.stderr)")
        #expect(soon.stderr.contains("warning: credential shop: the certificate expires on"), "\(soon.stderr)")
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
}
