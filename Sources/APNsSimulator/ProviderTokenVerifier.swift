import Crypto
import Foundation

/// A provider token signing key the simulator trusts: the (team, key id) pair Apple would have on file,
/// with the P-256 public key and, optionally, the topics (bundle IDs) that team may push to, the one
/// environment the key is restricted to, and the key it is related to.
public struct ProviderTokenKey: Sendable {
    public var teamID: String
    public var keyID: String
    public var publicKey: P256.Signing.PublicKey
    /// Bundle IDs this team may push to; `nil` allows any topic.
    public var topics: Set<String>?
    /// The environment the key is restricted to (Apple's keys for Sandbox only or Production only); a
    /// token it signed on the other environment is 403 BadEnvironmentKeyIdInToken. `nil`: both.
    public var environment: SimulatorEnvironment?
    /// The key id of the one key this key is related to (Apple allows a topic-specific key one related
    /// key). A connection takes tokens of its first token's key and of that key's related key; any other
    /// key of the team is 403 UnrelatedKeyIdInToken. The relation goes both ways: either key may name it.
    public var relatedKeyID: String?

    public init(
        teamID: String,
        keyID: String,
        publicKey: P256.Signing.PublicKey,
        topics: Set<String>? = nil,
        environment: SimulatorEnvironment? = nil,
        relatedKeyID: String? = nil
    ) {
        self.teamID = teamID
        self.keyID = keyID
        self.publicKey = publicKey
        self.topics = topics
        self.environment = environment
        self.relatedKeyID = relatedKeyID
    }

    /// From PEM text: a public key (`BEGIN PUBLIC KEY`) or the `.p8` private key Apple hands out
    /// (`BEGIN PRIVATE KEY`), whose public half is used.
    public init(
        teamID: String,
        keyID: String,
        pem: String,
        topics: Set<String>? = nil,
        environment: SimulatorEnvironment? = nil,
        relatedKeyID: String? = nil
    ) throws {
        let key: P256.Signing.PublicKey
        if pem.contains("PRIVATE KEY") {
            key = try P256.Signing.PrivateKey(pemRepresentation: pem).publicKey
        } else {
            key = try P256.Signing.PublicKey(pemRepresentation: pem)
        }
        self.init(
            teamID: teamID, keyID: keyID, publicKey: key, topics: topics, environment: environment,
            relatedKeyID: relatedKeyID)
    }
}

/// A provider token whose signature checked out.
package struct VerifiedProviderToken: Sendable, Equatable {
    var teamID: String
    var keyID: String
    var issuedAt: Double
    var topics: Set<String>?
}

/// Verifies ES256 provider tokens (JWT, "Communicating with APNs", Provider Authentication Tokens):
/// header `alg` ES256 and a known `kid`; claims `iss` (the key's team) and `iat`; signature raw r‖s over
/// `header.claims`. An `iat` older than one hour is ExpiredProviderToken; a key restricted to the
/// environment the simulator does not play is BadEnvironmentKeyIdInToken; anything else wrong is
/// InvalidProviderToken.
package struct ProviderTokenVerifier: Sendable {
    /// APNs rejects tokens whose `iat` is not within the last hour.
    static let tokenLifetime: Double = 3600
    /// Tolerated clock skew for an `iat` in the future.
    static let futureSkew: Double = 60

    private let keys: [String: ProviderTokenKey]
    /// The environment served; `nil` checks no key's environment.
    private let environment: SimulatorEnvironment?

    package init(keys: [ProviderTokenKey], environment: SimulatorEnvironment? = nil) {
        var byID: [String: ProviderTokenKey] = [:]
        for key in keys { byID[key.keyID] = key }
        self.keys = byID
        self.environment = environment
    }

    var isEmpty: Bool { keys.isEmpty }

    /// Whether a connection bound to key `first` may take a token of key `other`: the same key, or one
    /// of the two names the other as its related key.
    package func areRelated(_ first: String, _ other: String) -> Bool {
        first == other || keys[first]?.relatedKeyID == other || keys[other]?.relatedKeyID == first
    }

    /// Checks signature and claims; returns the reason APNs would answer when the token is refused.
    package func verify(authorization: String, now: Double) -> Result<VerifiedProviderToken, SimulatorReason> {
        guard let token = Self.bearerToken(authorization) else { return .failure(.invalidProviderToken) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Base64URL.decode(parts[0]),
            let claimsData = Base64URL.decode(parts[1]),
            let signatureData = Base64URL.decode(parts[2]),
            let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any],
            header["alg"] as? String == "ES256",
            let keyID = header["kid"] as? String,
            let key = keys[keyID],
            claims["iss"] as? String == key.teamID,
            let issuedAt = Self.number(claims["iat"]),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData)
        else { return .failure(.invalidProviderToken) }
        let signingInput = Data(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard key.publicKey.isValidSignature(signature, for: signingInput) else {
            return .failure(.invalidProviderToken)
        }
        if issuedAt > now + Self.futureSkew { return .failure(.invalidProviderToken) }
        if now - issuedAt > Self.tokenLifetime { return .failure(.expiredProviderToken) }
        if let restricted = key.environment, let environment, restricted != environment {
            return .failure(.badEnvironmentKeyIdInToken)
        }
        return .success(VerifiedProviderToken(teamID: key.teamID, keyID: keyID, issuedAt: issuedAt, topics: key.topics))
    }

    /// `bearer <token>`; the scheme is matched case-insensitively as HTTP auth schemes are.
    static func bearerToken(_ value: String) -> Substring? {
        guard value.count > 7, value.prefix(7).lowercased() == "bearer " else { return nil }
        let token = value.dropFirst(7).drop(while: { $0 == " " })
        return token.isEmpty ? nil : token
    }

    private static func number(_ value: Any?) -> Double? {
        if let n = value as? NSNumber, !(value is Bool) { return n.doubleValue }
        return nil
    }
}

/// Base64URL without padding (RFC 7515 §2).
enum Base64URL {
    static func decode<S: StringProtocol>(_ text: S) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        let remainder = base64.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { base64 += String(repeating: "=", count: 4 - remainder) }
        return Data(base64Encoded: base64)
    }

    static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
