import Foundation
import TestPeers
import Testing

@testable import APNs

/// What a new operator gave by mistake, said in words: a public key or a certificate as the `.p8`,
/// a certificate with another's key, a certificate that is never valid.
@Suite("Credentials given wrongly")
struct CredentialErrorTests {
    /// Runs `openssl` in `directory`; its standard error when it fails.
    private func openssl(_ arguments: [String], in directory: URL) async throws {
        let run = try await spawnAndAwait(
            "/bin/sh", ["-c", "cd '\(directory.path)' && openssl " + arguments.joined(separator: " ")])
        try #require(run.status == 0, "\(run.stderr)")
    }

    private func directory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("credentials-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private func text(_ url: URL, _ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: url.appendingPathComponent(name)))
    }

    // Before: "the token key is not a PEM private key", whatever the file was.
    @Test("a public key or a certificate given as the token key says what it is and what to give instead")
    func publicKeyOrCertificateAsTokenKey() async throws {
        let here = try directory()
        defer { try? FileManager.default.removeItem(at: here) }
        try await openssl(["genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem"], in: here)
        try await openssl(["pkey -in key.pem -pubout -out public.pem"], in: here)
        try await openssl(["req -x509 -key key.pem -subj /CN=x -days 1 -out cert.pem"], in: here)
        let publicKey = #expect(throws: APNsCredentialError.self) {
            try APNsSigningKey(pem: try text(here, "public.pem"))
        }
        #expect(
            publicKey?.message.contains("is a public key (BEGIN PUBLIC KEY)") == true,
            "\(String(describing: publicKey))")
        let certificate = #expect(throws: APNsCredentialError.self) {
            try APNsSigningKey(pem: try text(here, "cert.pem"))
        }
        #expect(certificate?.message.contains("is a certificate") == true, "\(String(describing: certificate))")
    }

    // Before: "cannot load the certificate or its key", then a hint about encrypted keys.
    @Test("a certificate with another certificate's key says they do not match")
    func mismatchedKey() async throws {
        let here = try directory()
        defer { try? FileManager.default.removeItem(at: here) }
        try await openssl(["genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem"], in: here)
        try await openssl(["genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out other.pem"], in: here)
        try await openssl(["req -x509 -key key.pem -subj /CN=x -days 1 -out cert.pem"], in: here)
        let error = #expect(throws: APNsCredentialError.self) {
            try APNsCertificateIdentity(certificatePEM: try text(here, "cert.pem"), keyPEM: try text(here, "other.pem"))
        }
        #expect(error?.code == .keyDoesNotMatchCertificate)
        #expect(error?.message.hasPrefix("the private key is not the certificate's") == true)
    }

    // Before: a warning that the dates could not be read, and exit 0.
    @Test("a certificate whose notBefore is after its notAfter is refused: it is never valid")
    func neverValid() async throws {
        let here = try directory()
        defer { try? FileManager.default.removeItem(at: here) }
        try Data().write(to: here.appendingPathComponent("index.txt"))
        try Data("01\n".utf8).write(to: here.appendingPathComponent("serial"))
        try Data(
            "[ ca ]\ndefault_ca = d\n[ d ]\ndatabase = index.txt\nserial = serial\nnew_certs_dir = .\ndefault_md = sha256\npolicy = p\n[ p ]\ncommonName = supplied\n"
                .utf8
        ).write(to: here.appendingPathComponent("ca.cnf"))
        try await openssl(
            ["req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem -subj /CN=x -out r.csr"],
            in: here)
        try await openssl(
            [
                "ca -config ca.cnf -selfsign -keyfile key.pem -in r.csr -startdate 20300101000000Z",
                "-enddate 20200101000000Z -batch -out cert.pem",
            ], in: here)
        let error = #expect(throws: APNsCredentialError.self) {
            try APNsCertificateIdentity(certificatePEM: try text(here, "cert.pem"), keyPEM: try text(here, "key.pem"))
        }
        #expect(
            error?.message
                == "the certificate is never valid: its notBefore (2030-01-01T00:00:00Z) is after its notAfter (2020-01-01T00:00:00Z)",
            "\(String(describing: error))")
    }
}
