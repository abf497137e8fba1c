import Foundation
import SwiftASN1
import X509

/// What a provider client certificate allows, read once per connection after the TLS handshake.
package struct ClientCertificateIdentity: Sendable {
    enum Validity: Sendable, Equatable {
        case valid
        /// Not signed by the configured client CA, or outside its validity dates: 403 BadCertificate.
        case bad
        /// Marked for the other environment: 403 BadCertificateEnvironment.
        case wrongEnvironment
    }

    var validity: Validity
    /// Topics from extension 1.2.840.113635.100.6.3.6, or the configured ones when it has none.
    var topics: [String]
    /// The subject's UID (the MDM topic and the default for a single-topic certificate).
    var uid: String?

    /// The topic used when the request has no `apns-topic`: the only topic, or `nil` when the
    /// certificate lists several (then MissingTopic).
    var defaultTopic: String? {
        let apps = topics.filter { PushType.implied(byTopic: $0) == nil }
        if apps.count == 1 { return apps[0] }
        if topics.count == 1 { return topics[0] }
        return apps.isEmpty ? uid : nil
    }

    /// Reads the leaf certificate (DER) against the client CA.
    static func read(
        leafDER: [UInt8],
        authority: Certificate,
        environment: SimulatorEnvironment,
        configuredTopics: [String],
        now: Date
    ) -> ClientCertificateIdentity {
        guard let leaf = try? Certificate(derEncoded: leafDER) else {
            return ClientCertificateIdentity(validity: .bad, topics: [], uid: nil)
        }
        let uid = leaf.subject.flatMap { $0 }.first { $0.type == SimulatorCertificateAuthority.userIDOID }
            .map { String(describing: $0.value) }
        var topics = configuredTopics
        if let ext = leaf.extensions[oid: SimulatorCertificateAuthority.topicsExtensionOID],
            let listed = try? decodeTopics(ext.value)
        {
            topics = listed
        }
        var validity = Validity.valid
        if leaf.issuer != authority.subject || !authority.publicKey.isValidSignature(leaf.signature, for: leaf)
            || now < leaf.notValidBefore || now > leaf.notValidAfter
        {
            validity = .bad
        } else {
            let dev = leaf.extensions[oid: SimulatorCertificateAuthority.developmentOID] != nil
            let prod = leaf.extensions[oid: SimulatorCertificateAuthority.productionOID] != nil
            if (environment == .production && dev && !prod) || (environment == .development && prod && !dev) {
                validity = .wrongEnvironment
            }
        }
        return ClientCertificateIdentity(validity: validity, topics: topics, uid: uid)
    }

    /// The extension's value: a SEQUENCE alternating topic (UTF8String) and a SEQUENCE of its kinds.
    static func decodeTopics(_ bytes: ArraySlice<UInt8>) throws -> [String] {
        let root = try DER.parse(bytes)
        guard case .constructed(let children) = root.content else { return [] }
        var topics: [String] = []
        for child in children where child.identifier == .utf8String {
            if case .primitive(let text) = child.content { topics.append(String(decoding: text, as: UTF8.self)) }
        }
        return topics
    }
}
