import Crypto
import Foundation
import SwiftASN1
import X509

/// A certificate authority made for one test: P-256 keys in memory, written to files only for the
/// clients that read them from there (librdkafka's `ssl.*.location`). Nothing is stored in the repo.
package struct TestCertificateAuthority: Sendable {
    package let certificate: Certificate
    private let key: P256.Signing.PrivateKey

    /// A new CA named `name`, valid from an hour ago for a day.
    package init(name: String) throws {
        let key = P256.Signing.PrivateKey()
        let subject = try DistinguishedName { CommonName(name) }
        self.key = key
        self.certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86400),
            issuer: subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
    }

    package var certificatePEM: String { get throws { try certificate.serializeAsPEM().pemString } }

    /// A server certificate for these names: DNS names, and IP addresses in dotted IPv4 text.
    package func issueServer(dnsNames: [String] = ["localhost"], ipAddresses: [String] = ["127.0.0.1"]) throws
        -> TestIdentity
    {
        var names = dnsNames.map { GeneralName.dnsName($0) }
        for address in ipAddresses {
            var bytes = in_addr()
            guard inet_pton(AF_INET, address, &bytes) == 1 else { continue }
            names.append(.ipAddress(ASN1OctetString(contentBytes: withUnsafeBytes(of: &bytes) { Array($0) }[...])))
        }
        return try issue(
            commonName: dnsNames.first ?? ipAddresses.first ?? "server",
            extensions: try Certificate.Extensions {
                SubjectAlternativeNames(names)
                try ExtendedKeyUsage([.serverAuth])
                KeyUsage(digitalSignature: true)
            })
    }

    /// A client certificate (for mutual TLS) with this common name.
    package func issueClient(commonName: String) throws -> TestIdentity {
        try issue(
            commonName: commonName,
            extensions: try Certificate.Extensions {
                try ExtendedKeyUsage([.clientAuth])
                KeyUsage(digitalSignature: true)
            })
    }

    private func issue(commonName: String, extensions: Certificate.Extensions) throws -> TestIdentity {
        let leafKey = P256.Signing.PrivateKey()
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(leafKey.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86400),
            issuer: self.certificate.subject, subject: try DistinguishedName { CommonName(commonName) },
            signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions, issuerPrivateKey: Certificate.PrivateKey(key))
        return TestIdentity(certificate: certificate, privateKey: leafKey)
    }
}

/// A certificate and its private key.
package struct TestIdentity: Sendable {
    package let certificate: Certificate
    package let privateKey: P256.Signing.PrivateKey

    package var certificatePEM: String { get throws { try certificate.serializeAsPEM().pemString } }
    /// PKCS#8 (`BEGIN PRIVATE KEY`).
    package var privateKeyPEM: String { privateKey.pemRepresentation }
}

/// A temporary directory of PEM files (keys readable by the owner only); `remove()` deletes it.
package struct TestPEMDirectory: Sendable {
    package let path: String

    /// A new directory in `parent` (the system's temporary directory by default).
    package init(under parent: String? = nil) throws {
        let parent = parent.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory
        path = parent.appendingPathComponent("tls-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    /// Writes a CA's certificate; returns the file's path.
    package func write(_ authority: TestCertificateAuthority, as name: String) throws -> String {
        try write(authority.certificatePEM, to: name, mode: 0o644)
    }

    /// Writes a certificate and its key; returns both paths.
    package func write(_ identity: TestIdentity, as name: String) throws -> (certificate: String, key: String) {
        (
            try write(identity.certificatePEM, to: "\(name).pem", mode: 0o644),
            try write(identity.privateKeyPEM, to: "\(name)-key.pem", mode: 0o600)
        )
    }

    private func write(_ text: String, to name: String, mode: Int) throws -> String {
        let file = path + "/" + name
        guard
            FileManager.default.createFile(
                atPath: file, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        else { throw CocoaError(.fileWriteUnknown) }
        return file
    }

    package func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Everything the broker-security tests need, made at test time and written to a temporary
/// directory: a CA clients trust and the broker certificate it signs (for 127.0.0.1 and localhost),
/// one from it for another host name, one from a CA clients do not trust, and a client certificate
/// from a client CA for mutual TLS. `remove()` deletes the files.
package struct BrokerTLSMaterial: Sendable {
    package let authority: TestCertificateAuthority
    package let server: TestIdentity
    package let otherHostServer: TestIdentity
    package let strangerServer: TestIdentity
    package let clientAuthority: TestCertificateAuthority
    package let client: TestIdentity
    package let directory: TestPEMDirectory
    package let caFile: String
    package let clientCertificateFile: String
    package let clientKeyFile: String

    /// The files go to a new directory in `parent` (the system's temporary directory by default).
    package init(under parent: String? = nil) throws {
        authority = try TestCertificateAuthority(name: "Test Kafka CA")
        server = try authority.issueServer()
        otherHostServer = try authority.issueServer(dnsNames: ["kafka.invalid"], ipAddresses: [])
        strangerServer = try TestCertificateAuthority(name: "Stranger CA").issueServer()
        clientAuthority = try TestCertificateAuthority(name: "Test Kafka client CA")
        client = try clientAuthority.issueClient(commonName: "apns-worker")
        directory = try TestPEMDirectory(under: parent)
        caFile = try directory.write(authority, as: "ca.pem")
        (clientCertificateFile, clientKeyFile) = try directory.write(client, as: "client")
    }

    /// librdkafka properties for TLS trusting `authority` (`SSL`, or `SASL_SSL` with `sasl`), with
    /// the client certificate when `clientCertificate`.
    package func clientProperties(clientCertificate: Bool = false, sasl: ProxySecurity.SASLPlain? = nil)
        -> [String: String]
    {
        var properties = ["security.protocol": sasl == nil ? "SSL" : "SASL_SSL", "ssl.ca.location": caFile]
        if clientCertificate {
            properties["ssl.certificate.location"] = clientCertificateFile
            properties["ssl.key.location"] = clientKeyFile
        }
        if let sasl {
            properties["sasl.mechanisms"] = "PLAIN"
            properties["sasl.username"] = sasl.username
            properties["sasl.password"] = sasl.password
        }
        return properties
    }

    package func remove() { directory.remove() }
}
