@testable import APNsSimulator
import Foundation
import Testing

@Suite("Broadcast and channel rules without a network")
struct BroadcastRuleUnitTests {
    @Test(
        "the create body takes exactly a storage policy of 0 or 1 and push-type LiveActivity in any case",
        arguments: [
            (#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#, "0"),
            (#"{"push-type":"liveactivity","message-storage-policy":1}"#, "1"),
            (#" {"message-storage-policy":1.0,"push-type":"LIVEACTIVITY"} "#, "1"),
            ("", "BadRequestPayload"), ("{", "BadRequestPayload"), ("[]", "BadRequestPayload"),
            ("null", "BadRequestPayload"), (#""LiveActivity""#, "BadRequestPayload"),
            (#"{"message-storage-policy":1,"push-type":"LiveActivity"} x"#, "BadRequestPayload"),
            (#"{"message-storage-policy":1,"push-type":"LiveActivity","extra":null}"#, "BadRequestParams"),
            (#"{"Message-Storage-Policy":1,"push-type":"LiveActivity"}"#, "BadRequestParams"),
            (#"{"message-storage-policy":2,"push-type":"LiveActivity"}"#, "BadRequestParams"),
            (#"{"message-storage-policy":-1,"push-type":"LiveActivity"}"#, "BadRequestParams"),
            (#"{"message-storage-policy":0.5,"push-type":"LiveActivity"}"#, "BadRequestParams"),
            (#"{"message-storage-policy":"1","push-type":"LiveActivity"}"#, "BadRequestParams"),
            (#"{"message-storage-policy":true,"push-type":"LiveActivity"}"#, "BadRequestParams"),
            (#"{"message-storage-policy":null,"push-type":"LiveActivity"}"#, "BadRequestParams"),
            (#"{"push-type":"LiveActivity"}"#, "BadRequestParams"),
            (#"{"message-storage-policy":1}"#, "MissingPushType"),
            (#"{}"#, "MissingPushType"),
            (#"{"message-storage-policy":1,"push-type":"alert"}"#, "InvalidPushType"),
            (#"{"message-storage-policy":1,"push-type":1}"#, "InvalidPushType"),
            (#"{"message-storage-policy":1,"push-type":null}"#, "InvalidPushType"),
        ])
    func createBody(_ body: String, _ expected: String) {
        let answer: String
        switch BroadcastRules.checkCreateBody(Array(body.utf8)) {
        case .success(let policy): answer = String(policy.rawValue)
        case .failure(let reason): answer = reason.rawValue
        }
        #expect(answer == expected, "\(body)")
    }

    @Test("channel ids are padded standard base64 of at most 64 characters")
    func channelIDSyntax() {
        for good in ["QUJD", "QUI=", "QQ==", "c3RvcmVkLWNoYW5uZWwtMDE=", "a+/b", String(repeating: "QUJD", count: 16)] {
            #expect(BroadcastRules.isChannelIDSyntax(good), "\(good)")
        }
        for bad in [
            "", "QUJ", "QQ", "Q===", "====", "QU=D", "a-_b", "QUJD ", "not base64!",
            String(repeating: "QUJD", count: 17),
        ] {
            #expect(!BroadcastRules.isChannelIDSyntax(bad), "\(bad)")
        }
        #expect(BroadcastRules.isChannelIDSyntax(ChannelRegistry.makeID()))
    }

    @Test("liveactivity in any case, nothing else")
    func liveActivityInAnyCase() {
        for good in ["liveactivity", "Liveactivity", "LiveActivity", "LIVEACTIVITY"] {
            #expect(BroadcastRules.isLiveActivity(good))
        }
        for bad in ["live-activity", "liveactivit", "liveactivityy", "alert", "", "lıveactivity"] {
            #expect(!BroadcastRules.isLiveActivity(bad), "\(bad)")
        }
    }

    @Test("the app in the path: a push-type suffix is TopicDisallowed, an app the credential lacks TopicMismatch")
    func appAgainstCredential() {
        let token = VerifiedProviderToken(teamID: "T", keyID: "K", issuedAt: 0, topics: [Fixture.topic])
        #expect(BroadcastRules.checkApp(Fixture.topic, authorization: .token(token)) == nil)
        #expect(BroadcastRules.checkApp(Fixture.strangerApp, authorization: .token(token)) == .topicMismatch)
        #expect(
            BroadcastRules.checkApp(Fixture.topic + ".push-type.liveactivity", authorization: .token(token))
                == .topicDisallowed)
        #expect(BroadcastRules.checkApp(Fixture.topic + ".voip", authorization: .none) == .topicDisallowed)
        let any = VerifiedProviderToken(teamID: "T", keyID: "K", issuedAt: 0, topics: nil)
        #expect(BroadcastRules.checkApp(Fixture.strangerApp, authorization: .token(any)) == nil)
        let certificate = ClientCertificateIdentity(
            validity: .valid, topics: [Fixture.topic + ".voip", Fixture.topic + ".push-type.liveactivity"], uid: nil)
        #expect(BroadcastRules.checkApp(Fixture.topic, authorization: .certificate(certificate)) == nil)
        #expect(
            BroadcastRules.checkApp(Fixture.otherApp, authorization: .certificate(certificate)) == .topicMismatch)
    }

    @Test("the new reasons are in the table with Apple's statuses, and fault names find them")
    func reasonTable() {
        let expected: [String: Int] = [
            "FeatureNotEnabled": 400, "MissingChannelId": 400, "BadChannelId": 400, "ChannelNotRegistered": 400,
            "BadRequestParams": 400, "BadRequestPayload": 400, "MissingPushType": 400,
            "CannotCreateChannelConfig": 400, "TopicMismatch": 403, "UnrelatedKeyIdInToken": 403,
            "BadEnvironmentKeyIdInToken": 403,
        ]
        for (name, status) in expected {
            #expect(SimulatorReason(named: name)?.status == status, "\(name)")
            #expect(SimulatorReason.all.contains { $0.rawValue == name })
        }
        #expect(Set(SimulatorReason.all.map(\.rawValue)).count == SimulatorReason.all.count, "no reason twice")
        let spaced = SimulatorReason(named: "Service Unavailable")
        #expect(spaced?.status == 503)
        #expect(spaced?.rawValue == "Service Unavailable")
        #expect(SimulatorReason(named: "ServiceUnavailable") == .serviceUnavailable)
        #expect(!SimulatorReason.all.contains { $0.rawValue == "Service Unavailable" }, "never answered on its own")
    }

    @Test("the key of a connection's first token decides which keys may follow")
    func unrelatedKeys() {
        let a = TestSigningKey(keyID: "KEYAAAAAAA")
        let b = TestSigningKey(keyID: "KEYBBBBBBB")
        let c = TestSigningKey(keyID: "KEYCCCCCCC")
        var trustedA = a.trusted()
        trustedA.relatedKeyID = b.keyID
        let verifier = ProviderTokenVerifier(keys: [trustedA, b.trusted(), c.trusted()])
        #expect(verifier.areRelated(a.keyID, b.keyID))
        #expect(verifier.areRelated(b.keyID, a.keyID))
        #expect(!verifier.areRelated(a.keyID, c.keyID))
        let now = Date().timeIntervalSince1970
        var machine = ConnectionAuthStateMachine(mode: .token, tokenUpdateWindow: 0)
        func reason(_ key: TestSigningKey) -> SimulatorReason? {
            if case .refuse(let reason) = machine.authorize(
                header: key.authorization(iat: now), now: now, verifier: verifier)
            {
                return reason
            }
            return nil
        }
        #expect(reason(b) == nil)
        #expect(reason(a) == nil, "related")
        #expect(reason(c) == .unrelatedKeyIdInToken)
        #expect(reason(b) == nil, "still bound to the first key, b")
    }

    @Test("a key restricted to one environment verifies there only")
    func keyEnvironment() {
        let key = TestSigningKey()
        var restricted = key.trusted()
        restricted.environment = .development
        let now = Date().timeIntervalSince1970
        let token = key.authorization(iat: now)
        #expect(
            (try? ProviderTokenVerifier(keys: [restricted], environment: .development).verify(
                authorization: token, now: now
            ).get()) != nil)
        #expect(
            ProviderTokenVerifier(keys: [restricted], environment: .production).verify(authorization: token, now: now)
                == .failure(.badEnvironmentKeyIdInToken))
        #expect(
            ProviderTokenVerifier(keys: [restricted], environment: .production).verify(
                authorization: TestSigningKey().authorization(iat: now), now: now) == .failure(.invalidProviderToken),
            "a bad signature is found out first")
    }

    @Test("accessory pushes go to the .push-type.accessory topic")
    func accessoryPushType() {
        #expect(PushType(rawValue: "accessory")?.topicSuffix == ".push-type.accessory")
        #expect(PushType.implied(byTopic: "com.a.push-type.accessory") == .accessory)
        #expect(PushType.bundleID(ofTopic: "com.a.push-type.accessory") == "com.a")
    }
}
