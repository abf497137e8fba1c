import Crypto
import Foundation
import SwiftASN1
import X509

/// A throw-away certificate authority: it signs the simulator's server certificate (so clients can
/// trust `ca.pem`) and, for certificate-based trust, provider client certificates carrying Apple's
/// topics extension. Keys are P-256 and live only in memory unless written out.
public struct SimulatorCertificateAuthority: Sendable {
    /// Apple's extension listing the topics a provider certificate may push to.
    public static let topicsExtensionOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 6]
    /// Apple's markers for a development-only and a production-only push certificate.
    public static let developmentOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 1]
    public static let productionOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 3, 2]

    /// The subject attribute (UID) Apple puts the bundle ID in.
    static let userIDOID: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]

    public let certificate: Certificate
    public let privateKey: P256.Signing.PrivateKey

    /// A new CA named `commonName`, valid from an hour ago for ten years.
    public init(commonName: String = "APNs Simulator CA") throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(commonName) }
        let now = Date()
        self.privateKey = key
        self.certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(10 * 365 * 86400),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
    }

    /// An existing CA from PEM.
    public init(certificatePEM: String, privateKeyPEM: String) throws {
        self.certificate = try Certificate(pemEncoded: certificatePEM)
        self.privateKey = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
    }

    public var certificatePEM: String { get throws { try certificate.serializeAsPEM().pemString } }

    /// A server certificate for these DNS names and IP addresses (dotted IPv4 or IPv6 text).
    public func issueServerCertificate(
        dnsNames: [String] = ["localhost"],
        ipAddresses: [String] = ["127.0.0.1", "::1"]
    ) throws -> IssuedCertificate {
        var names = dnsNames.map { GeneralName.dnsName($0) }
        names += ipAddresses.compactMap {
            Self.addressBytes($0).map { GeneralName.ipAddress(ASN1OctetString(contentBytes: $0[...])) }
        }
        let extensions = try Certificate.Extensions {
            SubjectAlternativeNames(names)
            try ExtendedKeyUsage([.serverAuth])
            KeyUsage(digitalSignature: true)
        }
        return try issue(commonName: dnsNames.first ?? "localhost", uid: nil, extensions: extensions)
    }

    /// A provider certificate as Apple issues them: topics in extension 1.2.840.113635.100.6.3.6 (each
    /// followed by its kind), the bundle ID as subject UID, and optionally marked for one environment.
    /// `validFor` lets tests make an expired one (a negative interval).
    public func issueClientCertificate(
        topics: [String],
        environment: SimulatorEnvironment? = nil,
        validFor: TimeInterval = 365 * 86400
    ) throws -> IssuedCertificate {
        let now = Date()
        let start = validFor < 0 ? now.addingTimeInterval(validFor * 2) : now.addingTimeInterval(-3600)
        return try issueClientCertificate(
            topics: topics, environment: environment, validity: start...now.addingTimeInterval(validFor))
    }

    /// A provider certificate valid exactly from `validity`'s start to its end (an expired one, one
    /// not valid yet, one that expires in days).
    public func issueClientCertificate(
        topics: [String],
        environment: SimulatorEnvironment? = nil,
        validity: ClosedRange<Date>
    ) throws -> IssuedCertificate {
        let value = try Self.encodeTopics(topics)
        let extensions = try Certificate.Extensions {
            try ExtendedKeyUsage([.clientAuth])
            KeyUsage(digitalSignature: true)
            Certificate.Extension(oid: Self.topicsExtensionOID, critical: false, value: value[...])
            if environment == .development {
                Certificate.Extension(oid: Self.developmentOID, critical: false, value: [0x05, 0x00])
            }
            if environment == .production {
                Certificate.Extension(oid: Self.productionOID, critical: false, value: [0x05, 0x00])
            }
        }
        let commonName = "Apple Push Services: \(topics.first ?? "")"
        return try issue(commonName: commonName, uid: topics.first, validity: validity, extensions: extensions)
    }

    private func issue(
        commonName: String,
        uid: String?,
        validity: ClosedRange<Date> = Date().addingTimeInterval(-3600)...Date().addingTimeInterval(825 * 86400),
        extensions: Certificate.Extensions
    ) throws -> IssuedCertificate {
        let key = P256.Signing.PrivateKey()
        var rdns = [
            RelativeDistinguishedName(
                RelativeDistinguishedName.Attribute(type: .RDNAttributeType.commonName, utf8String: commonName))
        ]
        if let uid {
            rdns.append(
                RelativeDistinguishedName(RelativeDistinguishedName.Attribute(type: Self.userIDOID, utf8String: uid)))
        }
        let subject = DistinguishedName(rdns)
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: validity.lowerBound,
            notValidAfter: validity.upperBound,
            issuer: self.certificate.subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(privateKey)
        )
        return IssuedCertificate(certificate: certificate, privateKey: key)
    }

    static func encodeTopics(_ topics: [String]) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { coder in
            for topic in topics {
                try coder.serialize(ASN1UTF8String(topic))
                try coder.appendConstructedNode(identifier: .sequence) { kind in
                    try kind.serialize(ASN1UTF8String(Self.kind(of: topic)))
                }
            }
        }
        return serializer.serializedBytes
    }

    private static func kind(of topic: String) -> String {
        switch PushType.implied(byTopic: topic) {
        case .voip: return "voip"
        case .complication: return "complication"
        default: return "app"
        }
    }

    private static func addressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}

/// A certificate and its private key, as PEM for files and TLS libraries.
public struct IssuedCertificate: Sendable {
    public let certificate: Certificate
    public let privateKey: P256.Signing.PrivateKey

    public var certificatePEM: String { get throws { try certificate.serializeAsPEM().pemString } }
    /// PKCS#8 (`BEGIN PRIVATE KEY`).
    public var privateKeyPEM: String { privateKey.pemRepresentation }
}
