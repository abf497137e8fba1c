import Foundation

/// Keys and certificates made with the `openssl` command at test time (never committed):
/// a CA and a server certificate for localhost/127.0.0.1 it signed, a second unrelated CA, an
/// APNs-style `.p8` token key, and a client certificate as PEM and PKCS#12.
final class TestPKI: Sendable {
    let directory: TemporaryDirectory
    var caCertificate: String { directory.file("ca.pem") }
    var otherCACertificate: String { directory.file("other-ca.pem") }
    var serverCertificate: String { directory.file("server.pem") }
    var serverKey: String { directory.file("server.key") }
    var tokenKey: String { directory.file("AuthKey_TESTKEY123.p8") }
    var tokenPublicKey: String { directory.file("token-public.pem") }
    /// An RSA key (made on demand: RSA generation is slow).
    func makeRSAKey() throws -> String {
        let path = directory.file("rsa.key")
        try runCommand(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path])
        return path
    }
    var clientCertificate: String { directory.file("client.pem") }
    var clientKey: String { directory.file("client.key") }
    var clientPKCS12: String { directory.file("client.p12") }
    let pkcs12Password = "test-password"

    init() throws {
        directory = try TemporaryDirectory()
        let d = directory
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try runCommand(
            ["openssl", "req", "-x509"] + ec + [
                "-keyout", d.file("ca.key"), "-out", caCertificate, "-days", "2", "-subj", "/CN=APNs Test CA",
            ])
        try runCommand(
            ["openssl", "req", "-x509"] + ec + [
                "-keyout", d.file("other-ca.key"), "-out", otherCACertificate, "-days", "2", "-subj", "/CN=Other CA",
            ])
        try runCommand(
            ["openssl", "req"] + ec + ["-keyout", serverKey, "-out", d.file("server.csr"), "-subj", "/CN=localhost"])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(
            toFile: d.file("server.ext"), atomically: true, encoding: .utf8)
        try runCommand([
            "openssl", "x509", "-req", "-in", d.file("server.csr"), "-CA", caCertificate, "-CAkey", d.file("ca.key"),
            "-CAcreateserial", "-out", serverCertificate, "-days", "2", "-extfile", d.file("server.ext"),
        ])
        try runCommand([
            "openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", tokenKey,
        ])
        try runCommand(["openssl", "pkey", "-in", tokenKey, "-pubout", "-out", tokenPublicKey])
        try runCommand(
            ["openssl", "req"] + ec + [
                "-keyout", clientKey, "-out", d.file("client.csr"), "-subj", "/CN=Apple Push Services: com.example.app",
            ])
        try runCommand([
            "openssl", "x509", "-req", "-in", d.file("client.csr"), "-CA", caCertificate, "-CAkey", d.file("ca.key"),
            "-CAcreateserial", "-out", clientCertificate, "-days", "2",
        ])
        try runCommand([
            "openssl", "pkcs12", "-export", "-in", clientCertificate, "-inkey", clientKey, "-out", clientPKCS12,
            "-passout", "pass:\(pkcs12Password)",
        ])
    }

    func bytes(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }
}
