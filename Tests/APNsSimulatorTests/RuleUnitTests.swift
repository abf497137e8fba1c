@testable import APNsSimulator
import Foundation
import Testing

@Suite("Rules without a network")
struct RuleUnitTests {
    @Test(
        "the JSON check accepts only well-formed objects: no arrays, strings, bad escapes or 100-deep nesting",
        arguments: [
            (#"{}"#, true), (#" {"a":[1,2.5e-3,true,false,null,"x\u00e9\n"]} "#, true), (#"{"a":{"b":{}}}"#, true),
            (#"[]"#, false), (#""s""#, false), (#"{"a":}"#, false), (#"{"a":1,}"#, false), (#"{'a':1}"#, false),
            (#"{"a":01}"#, false), (#"{"a":1} x"#, false), (#"{"a":"\x"}"#, false), ("{\"a\":\"\u{01}\"}", false),
            (#"{"a":tru}"#, false),
            (String(repeating: "{\"a\":", count: 100) + "1" + String(repeating: "}", count: 100), false),
        ])
    func jsonObjectScanner(_ text: String, _ isObject: Bool) {
        let result = Array(text.utf8).withUnsafeBytes { JSONSyntax.isObject($0) }
        #expect(result == isObject, "\(text)")
    }

    @Test("topic suffixes imply their push type and strip to the bundle ID; VoIP allows 5120 bytes, others 4096")
    func pushTypeSuffixes() {
        #expect(PushType.implied(byTopic: "com.a.push-type.liveactivity") == .liveactivity)
        #expect(PushType.implied(byTopic: "com.a.voip-ptt") == .pushtotalk)
        #expect(PushType.implied(byTopic: "com.a.voip") == .voip)
        #expect(PushType.implied(byTopic: "com.a") == nil)
        #expect(PushType.bundleID(ofTopic: "com.a.pushkit.fileprovider") == "com.a")
        #expect(PushType.voip.maximumPayloadSize == 5120)
        #expect(PushType.alert.maximumPayloadSize == 4096)
    }

    @Test("apns-id must be a hyphenated UUID, lowercase unless allowed; apns-expiration non-negative epoch seconds")
    func uuidAndExpirationSyntax() {
        #expect(RequestRules.isCanonicalUUID("123e4567-e89b-12d3-a456-4266554400a0", allowUppercase: false))
        #expect(!RequestRules.isCanonicalUUID("123E4567-E89B-12D3-A456-4266554400A0", allowUppercase: false))
        #expect(RequestRules.isCanonicalUUID("123E4567-E89B-12D3-A456-4266554400A0", allowUppercase: true))
        #expect(!RequestRules.isCanonicalUUID("123e4567e89b12d3a4564266554400a0", allowUppercase: true))
        #expect(RequestRules.isEpochSeconds("0"))
        #expect(!RequestRules.isEpochSeconds("-1"))
        #expect(!RequestRules.isEpochSeconds(""))
    }

    @Test("made-up apns-ids are unique, lowercase, canonical version-4 UUIDs")
    func madeUpMessageIDsAreCanonicalVersion4() {
        var generator = MessageIDGenerator()
        let ids = (0..<1000).map { _ in generator.next() }
        #expect(Set(ids).count == 1000)
        #expect(
            ids.allSatisfy {
                RequestRules.isCanonicalUUID($0, allowUppercase: false) && Array($0)[14] == "4"
                    && "89ab".contains(Array($0)[19])
            })
    }

    @Test("the token verifier takes only ES256 tokens of the key's team, not future-dated; over an hour old is expired")
    func tokenVerifierRejectsOtherAlgorithmsAndTeams() {
        let key = TestSigningKey()
        let verifier = ProviderTokenVerifier(keys: [key.trusted()])
        let now = Date().timeIntervalSince1970
        func b64(_ s: String) -> String { Base64URL.encode(Data(s.utf8)) }
        let good = key.authorization(iat: now)
        #expect((try? verifier.verify(authorization: good, now: now).get())?.teamID == key.teamID)
        let parts = good.dropFirst(7).split(separator: ".")
        let hs256 = "bearer " + b64(#"{"alg":"HS256","kid":"\#(key.keyID)"}"#) + "." + parts[1] + "." + parts[2]
        #expect(verifier.verify(authorization: hs256, now: now) == .failure(.invalidProviderToken))
        let none = "bearer " + b64(#"{"alg":"none","kid":"\#(key.keyID)"}"#) + "." + parts[1] + "."
        #expect(verifier.verify(authorization: none, now: now) == .failure(.invalidProviderToken))
        let wrongTeam = key.authorization(iat: now, iss: "OTHERTEAM1")
        #expect(verifier.verify(authorization: wrongTeam, now: now) == .failure(.invalidProviderToken))
        #expect(
            verifier.verify(authorization: key.authorization(iat: now + 600), now: now)
                == .failure(.invalidProviderToken))
        #expect(
            verifier.verify(authorization: key.authorization(iat: now - 3601), now: now)
                == .failure(.expiredProviderToken))
        #expect(verifier.verify(authorization: "Basic abc", now: now) == .failure(.invalidProviderToken))
    }

    @Test("a provider token key loads from a .p8 private key or a public-key PEM")
    func providerKeyFromP8OrPublicPEM() throws {
        let key = TestSigningKey()
        let fromP8 = try ProviderTokenKey(teamID: "T", keyID: "K", pem: key.p8)
        let fromPublic = try ProviderTokenKey(teamID: "T", keyID: "K", pem: key.privateKey.publicKey.pemRepresentation)
        #expect(fromP8.publicKey.rawRepresentation == key.privateKey.publicKey.rawRepresentation)
        #expect(fromPublic.publicKey.rawRepresentation == key.privateKey.publicKey.rawRepresentation)
    }

    @Test("the certificate's APNs topics extension round-trips through encode and decode")
    func topicsExtensionRoundTrips() throws {
        let topics = ["com.example.app", "com.example.app.voip", "com.example.app.complication"]
        let bytes = try SimulatorCertificateAuthority.encodeTopics(topics)
        #expect(try ClientCertificateIdentity.decodeTopics(bytes[...]) == topics)
    }
}
