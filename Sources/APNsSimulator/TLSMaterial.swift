import Foundation
import NIOSSL

/// The server's certificate chain and key, loaded from files or generated into a directory.
struct TLSMaterial {
    var certificateChain: [NIOSSLCertificate]
    var privateKey: NIOSSLPrivateKey
    /// The CA a client should trust, when the simulator generated one.
    var authorityPath: String?

    static func load(_ source: SimulatorConfiguration.TLSSource) throws -> TLSMaterial {
        switch source {
        case .files(let chain, let key):
            return TLSMaterial(
                certificateChain: try NIOSSLCertificate.fromPEMFile(chain),
                privateKey: try NIOSSLPrivateKey(file: key, format: .pem),
                authorityPath: nil
            )
        case .directory(let directory):
            let paths = TLSDirectory(directory)
            try paths.generateIfMissing()
            var material = try load(.files(certificateChain: paths.server, privateKey: paths.serverKey))
            material.authorityPath = FileManager.default.fileExists(atPath: paths.authority) ? paths.authority : nil
            return material
        }
    }
}

/// The file names of `--tls-dir`.
public struct TLSDirectory: Sendable {
    public let directory: String
    public var authority: String { directory + "/ca.pem" }
    public var authorityKey: String { directory + "/ca-key.pem" }
    public var server: String { directory + "/server.pem" }
    public var serverKey: String { directory + "/server-key.pem" }

    public init(_ directory: String) { self.directory = directory }

    /// Generates `ca.pem` (+ key) and a server certificate signed by it, unless `server.pem` and
    /// `server-key.pem` are both there already. An existing CA is reused to sign a missing server certificate.
    public func generateIfMissing() throws {
        let files = FileManager.default
        if files.fileExists(atPath: server) && files.fileExists(atPath: serverKey) { return }
        try files.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let authority: SimulatorCertificateAuthority
        if files.fileExists(atPath: self.authority), files.fileExists(atPath: authorityKey) {
            authority = try SimulatorCertificateAuthority(
                certificatePEM: String(contentsOfFile: self.authority, encoding: .utf8),
                privateKeyPEM: String(contentsOfFile: authorityKey, encoding: .utf8)
            )
        } else {
            authority = try SimulatorCertificateAuthority()
            try write(authority.privateKey.pemRepresentation, to: authorityKey, private: true)
            try write(try authority.certificatePEM, to: self.authority, private: false)
        }
        let issued = try authority.issueServerCertificate()
        try write(issued.privateKeyPEM, to: serverKey, private: true)
        try write(try issued.certificatePEM, to: server, private: false)
    }

    private func write(_ text: String, to path: String, private: Bool) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        if `private` { try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path) }
    }
}
