import Testing

@testable import APNs

@Suite("Notification rules (Apple's provider API)")
struct NotificationRulesTests {
    @Test("a collapse id derived from an event id: SHA-256 in base64url, 43 bytes, a valid apns-collapse-id")
    func derivedCollapseID() throws {
        #expect(APNsDerivedCollapseID.fromEventID("abc") == "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0")
        let long = APNsDerivedCollapseID.fromEventID(String(repeating: "é", count: 256))
        #expect(long.utf8.count == 43)
        var notification = APNsNotification(
            deviceToken: try APNsDeviceToken("aabb"), topic: "com.example.app", pushType: .alert,
            collapseID: long, payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        #expect(throws: Never.self) { try notification.validate() }
        notification.collapseID = long + long
        #expect(throws: APNsNotificationError.self) { try notification.validate() }
    }

    static let token = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0"

    func alert(
        topic: String = "com.example.app",
        pushType: APNsPushType = .alert,
        priority: APNsPriority? = nil,
        collapseID: String? = nil,
        payload: String = #"{"aps":{"alert":"Hello"}}"#
    ) throws -> APNsNotification {
        APNsNotification(
            deviceToken: try APNsDeviceToken(Self.token), topic: topic, pushType: pushType,
            priority: priority, collapseID: collapseID, payload: Array(payload.utf8))
    }

    func violation(_ body: () throws -> Void) -> APNsNotificationError? {
        do {
            try body()
            return nil
        } catch let error as APNsNotificationError {
            return error
        } catch {
            return nil
        }
    }

    @Test("a valid alert passes, also with priority 10 and a 64-byte collapse ID")
    func aValidAlertPasses() throws {
        try alert().validate(for: .token)
        try alert(priority: .immediate, collapseID: String(repeating: "c", count: 64)).validate()
    }

    @Test(
        "device tokens: hex, even length, any size, case folded",
        arguments: [
            ("", false), ("abc", false), ("zz", false), ("ab cd", false), ("ab", true),
            (String(repeating: "AB", count: 100), true), (token, true),
        ])
    func deviceTokens(input: String, valid: Bool) throws {
        let error = violation { _ = try APNsDeviceToken(input) }
        #expect((error == nil) == valid)
        if let error {
            #expect(error.code == .badDeviceToken)
            #expect(error.apnsReason == "BadDeviceToken")
        }
        if valid { #expect(try APNsDeviceToken(input).hex == input.lowercased()) }
    }

    @Test("a device token is never printed whole, only its ends; its request path carries all of it")
    func deviceTokenIsNeverPrintedWhole() throws {
        let token = try APNsDeviceToken(Self.token)
        #expect("\(token)" == "00fc13ad…e8f0")
        #expect(!"\(token)".contains(Self.token))
        #expect(token.path == "/3/device/" + Self.token)
    }

    @Test("every push type's topic suffix", arguments: APNsPushType.allCases)
    func topicSuffix(type: APNsPushType) throws {
        let suffix = type.topicSuffix ?? ""
        let priority: APNsPriority = type == .background ? .powerConsidered : .immediate
        try alert(topic: "com.example.app" + suffix, pushType: type, priority: priority).validate(for: .token)
        if let suffix = type.topicSuffix {
            let bare = violation { try alert(topic: "com.example.app", pushType: type).validate() }
            #expect(bare?.code == .topicSuffixMismatch)
            #expect(bare?.field == .topic)
            let onlySuffix = violation { try alert(topic: suffix, pushType: type).validate() }
            #expect(onlySuffix?.code == .topicSuffixMismatch)
        }
    }

    @Test("each push type's topic suffix is the one Apple documents")
    func suffixesAreApples() {
        let expected: [APNsPushType: String?] = [
            .alert: nil, .background: nil, .mdm: nil, .voip: ".voip", .complication: ".complication",
            .fileprovider: ".pushkit.fileprovider", .liveactivity: ".push-type.liveactivity",
            .location: ".location-query", .pushtotalk: ".voip-ptt", .widgets: ".push-type.widgets",
            .controls: ".push-type.controls", .accessory: ".push-type.accessory",
        ]
        #expect(expected.count == APNsPushType.allCases.count)
        for type in APNsPushType.allCases { #expect(type.topicSuffix == expected[type]!) }
    }

    @Test("a topic must be a header-safe name: empty is MissingTopic, a space or non-ASCII letter is BadTopic")
    func topicMustBeAHeaderSafeName() {
        #expect(violation { try alert(topic: "").validate() }?.code == .missingTopic)
        #expect(violation { try alert(topic: "com.example app").validate() }?.code == .badTopic)
        #expect(violation { try alert(topic: "com.exämple").validate() }?.code == .badTopic)
    }

    @Test("Live Activity pushes use priority 10 or 5, never 1")
    func liveActivityPriority() throws {
        let topic = "com.example.app.push-type.liveactivity"
        let lowest = violation { try alert(topic: topic, pushType: .liveactivity, priority: .lowPower).validate() }
        #expect(lowest?.code == .badPriority)
        #expect(lowest?.field == .priority)
        try alert(topic: topic, pushType: .liveactivity, priority: .powerConsidered).validate()
    }

    @Test("background pushes never use priority 10: asking for it is BadPriority, and none given means 5")
    func backgroundNeverUsesPriority10() throws {
        let error = violation { try alert(pushType: .background, priority: .immediate).validate() }
        #expect(error?.code == .badPriority)
        #expect(error?.field == .priority)
        #expect(error?.apnsReason == "BadPriority")
        try alert(pushType: .background, priority: .lowPower).validate()
        // No priority given: background goes out with 5, never with APNs's default of 10.
        #expect(try alert(pushType: .background).headerPriority == .powerConsidered)
        #expect(try alert(pushType: .alert).headerPriority == nil)
    }

    @Test("location pushes need token authentication and are refused over a certificate")
    func locationNeedsTokenAuthentication() throws {
        let location = try alert(topic: "com.example.app.location-query", pushType: .location)
        try location.validate(for: .token)
        #expect(violation { try location.validate(for: .certificate) }?.code == .tokenAuthenticationRequired)
    }

    @Test("a collapse ID is 1 to 64 bytes, counted in UTF-8 bytes, not characters; else BadCollapseId")
    func collapseIDIsAtMost64Bytes() {
        let tooLong = violation { try alert(collapseID: String(repeating: "c", count: 65)).validate() }
        #expect(tooLong?.code == .badCollapseID)
        #expect(tooLong?.apnsReason == "BadCollapseId")
        // Bytes, not characters: 22 three-byte characters are 66 bytes.
        #expect(
            violation { try alert(collapseID: String(repeating: "€", count: 22)).validate() }?.code == .badCollapseID)
        #expect(violation { try alert(collapseID: "").validate() }?.code == .badCollapseID)
    }

    @Test("payloads may be 4096 bytes, 5120 for VoIP; one byte more is PayloadTooLarge")
    func payloadLimitsAre4096And5120ForVoIP() throws {
        func payload(bytes: Int) -> String {
            let filler = String(repeating: "x", count: bytes - #"{"aps":{},"f":""}"#.utf8.count)
            return #"{"aps":{},"f":"\#(filler)"}"#
        }
        try alert(payload: payload(bytes: 4096)).validate()
        let big = violation { try alert(payload: payload(bytes: 4097)).validate() }
        #expect(big?.code == .payloadTooLarge)
        #expect(big?.apnsReason == "PayloadTooLarge")
        try alert(topic: "com.example.app.voip", pushType: .voip, payload: payload(bytes: 5120)).validate()
        let bigVoIP = violation {
            try alert(topic: "com.example.app.voip", pushType: .voip, payload: payload(bytes: 5121)).validate()
        }
        #expect(bigVoIP?.code == .payloadTooLarge)
    }

    @Test("a payload must be a plain JSON object: not empty, not an array, not malformed, not gzip-compressed")
    func payloadMustBeAPlainJSONObject() {
        #expect(violation { try alert(payload: "").validate() }?.code == .payloadEmpty)
        #expect(violation { try alert(payload: "[1]").validate() }?.code == .payloadNotJSONObject)
        #expect(violation { try alert(payload: #"{"aps": }"#).validate() }?.code == .payloadNotJSONObject)
        let gzip = APNsNotification(
            deviceToken: try! APNsDeviceToken("ab"), topic: "t", pushType: .alert, payload: [0x1F, 0x8B, 8, 0])
        #expect(violation { try gzip.validate() }?.code == .payloadCompressed)
    }

    @Test("a negative expiration is refused and 0 means immediately; apns-id takes only hyphenated UUIDs, lowercased")
    func expirationAndMessageID() throws {
        var notification = try alert()
        notification.expiration = .at(secondsSince1970: -5)
        #expect(violation { try notification.validate() }?.code == .badExpirationDate)
        #expect(APNsExpiration(secondsSince1970: 0) == .immediately)
        #expect(APNsExpiration.at(secondsSince1970: 100).hasPassed(now: 100))
        #expect(!APNsExpiration.immediately.hasPassed(now: .max))

        #expect(
            try APNsNotificationID("EABEAE54-14A8-11E5-B60B-1697F925EC7B").uuidString
                == "eabeae54-14a8-11e5-b60b-1697f925ec7b")
        for bad in [
            "", "eabeae5414a811e5b60b1697f925ec7b", "{eabeae54-14a8-11e5-b60b-1697f925ec7b}",
            "eabeae54-14a8-11e5-b60b-1697f925ec7g", "eabeae54x14a8-11e5-b60b-1697f925ec7b",
            "eabeae5-414a8-11e5-b60b-1697f925ec7b",
        ] {
            #expect(violation { _ = try APNsNotificationID(bad) }?.code == .badMessageID)
        }
        #expect(APNsNotificationID.derived(fromEventID: "order-17") == nil)
        #expect(
            APNsNotificationID.derived(fromEventID: "EABEAE54-14A8-11E5-B60B-1697F925EC7B")?.uuidString
                == "eabeae54-14a8-11e5-b60b-1697f925ec7b")
        for id in ["eabeae54-14a8-11e5-b60b-1697f925ec7b", "eabeae54-14a8-11e5-b60b-1697F925EC7B"] {
            #expect(APNsNotificationID.derived(fromEventID: id)?.uuidString == "eabeae54-14a8-11e5-b60b-1697f925ec7b")
        }
        let random = APNsNotificationID.random().uuidString
        #expect(try APNsNotificationID(random).uuidString == random)
    }
}
