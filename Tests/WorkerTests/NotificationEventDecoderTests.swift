import APNs
import JSONSchema
import Testing
import Worker

@Suite("notification events: every rule, located")
struct NotificationEventDecoderTests {
    let decoder = NotificationEventDecoder.standard

    /// The single problem of an event in first-error mode, with its location and keyword.
    func problem(_ bytes: [UInt8]) throws -> EventProblem {
        do {
            _ = try decoder.decode(bytes)
        } catch {
            return try #require(error.problems.first)
        }
        Issue.record("event was accepted: \(String(decoding: bytes, as: UTF8.self).prefix(200))")
        throw CancellationError()
    }

    func expect(
        _ changes: [String: JSONValue?], at pointer: String, keyword: String, kind: EventProblem.Kind = .schema,
        schemaPointer: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let p = try problem(EventFixtures.event(changes))
        #expect(p.instanceLocation == pointer, sourceLocation: sourceLocation)
        #expect(p.keyword == keyword, "\(p)", sourceLocation: sourceLocation)
        #expect(p.kind == kind, sourceLocation: sourceLocation)
        if let schemaPointer {
            #expect(
                p.schemaLocation == "urn:apns-worker:schema:notification-event#" + schemaPointer,
                sourceLocation: sourceLocation)
        }
        // Collect-all mode reports the same problem among its list.
        #expect(decoder.problems(in: EventFixtures.event(changes)[...]).contains(p), sourceLocation: sourceLocation)
    }

    @Test("what APNs refuses is refused here: control characters in a collapse id, an alert to a .voip topic")
    func headerSafety() throws {
        for collapseID in ["a\nb", "a\r\n x-evil: 1", "a\u{0}b", "tab\there"] {
            let p = try problem(EventFixtures.event(["collapseId": .string(collapseID)]))
            #expect(p.instanceLocation == "/collapseId", "\(collapseID.debugDescription)")
            #expect(p.message.contains("control characters"), "\(p)")
        }
        for topic in ["com.example.app.voip", "com.example.app.push-type.liveactivity", "com.example.app.voip-ptt"] {
            let p = try problem(EventFixtures.event(["topic": .string(topic)]))
            #expect(p.instanceLocation == "/topic")
            #expect(p.message.contains("bare bundle id"), "\(p)")
        }
        // The same rules in code, for events checked with another schema.
        let notification = APNsNotification(
            deviceToken: try APNsDeviceToken(String(repeating: "ab", count: 32)), topic: "com.example.app.voip",
            pushType: .alert, payload: Array(#"{"aps":{"alert":"x"}}"#.utf8))
        #expect(throws: APNsNotificationError.self) { try notification.validate() }
        var collapsed = notification
        collapsed.topic = "com.example.app"
        collapsed.collapseID = "a\r\nb"
        let error = #expect(throws: APNsNotificationError.self) { try collapsed.validate() }
        #expect(error?.code == .badCollapseID)
    }

    @Test("messages say what was expected: the rule's own words, anyOf spelt out, a string where a number belongs")
    func messagesForPeople() throws {
        let voip = try problem(EventFixtures.event(["pushType": "voip", "topic": "com.example.app"]))
        #expect(voip.message == "push type 'voip' needs the topic <bundle id>.voip")
        let alert = try problem(EventFixtures.event(["payload": ["aps": ["category": "x"]]]))
        #expect(
            alert.description
                == "/payload/aps: needs one of 'alert', 'sound', 'badge': required property 'alert' is missing")
        let priority = try problem(EventFixtures.event(["priority": "10"]))
        #expect(priority.description == "/priority: value '10' is a string; expected one of the integers 10, 5, 1")
        let background = try problem(
            EventFixtures.event([
                "pushType": "background", "priority": 5, "payload": ["aps": ["content-available": 1, "alert": "x"]],
            ]))
        #expect(background.message == "must not have 'alert', 'sound', 'badge'")
    }

    // A broadcast with "event": "start" and no attributes was reported as missing attributes-type;
    // the real problem (a broadcast cannot start an activity) came fourth.
    @Test("the problem reported first is the one to fix first: a wrong value before the properties it made required")
    func fixFirst() throws {
        let broadcast = Array(
            #"{"id":"b1","channelId":"dGVzdA==","topic":"com.example.app","pushType":"liveactivity","priority":10,"expiration":0,"payload":{"aps":{"timestamp":1,"event":"start","content-state":{}}}}"#
                .utf8)
        let first = try problem(broadcast)
        #expect(first.instanceLocation == "/payload/aps/event", "\(first)")
        #expect(first.description.contains("a broadcast updates or ends a Live Activity"), "\(first)")
        let all = decoder.problems(in: broadcast[...])
        #expect(all.first == first)
        #expect(all.contains { $0.keyword == "required" }, "the missing properties are still listed, after it")
    }

    @Test("Live Activity rules, located: start needs attributes-type, attributes and alert; start-only keys; types")
    func liveActivityRules() throws {
        func liveActivity(_ aps: JSONValue, priority: JSONValue? = nil) -> [UInt8] {
            var changes: [String: JSONValue?] = [
                "pushType": "liveactivity", "topic": "com.example.app.push-type.liveactivity",
                "payload": ["aps": aps],
            ]
            if let priority { changes["priority"] = priority }
            return EventFixtures.event(changes)
        }
        let start: JSONValue = [
            "timestamp": 1_700_000_000, "event": "start", "attributes-type": "MatchAttributes",
            "attributes": ["home": "A"], "content-state": ["score": 0], "alert": ["title": "Kick-off"],
            "input-push-token": 1,
        ]
        _ = try decoder.decode(liveActivity(start))
        guard case .object(var missingType) = start else { return }
        missingType["attributes-type"] = nil
        let missing = try problem(liveActivity(.object(missingType)))
        #expect(missing.description == "/payload/aps: required property 'attributes-type' is missing")
        #expect(missing.keyword == "required")
        let startOnly = try problem(
            liveActivity(["timestamp": 1, "event": "update", "content-state": [:], "input-push-channel": "abc"]))
        #expect(startOnly.message == "input-push-token and input-push-channel belong on a start event only")
        let state = try problem(liveActivity(["timestamp": 1, "event": "update", "content-state": []]))
        #expect(state.instanceLocation == "/payload/aps/content-state")
        #expect(state.keyword == "type")
        let stale = try problem(liveActivity(["timestamp": 1, "event": "end", "stale-date": "soon"]))
        #expect(stale.instanceLocation == "/payload/aps/stale-date")
        let lowest = try problem(liveActivity(["timestamp": 1, "event": "end"], priority: 1))
        #expect(lowest.description == "/priority: Live Activity pushes use priority 10 or 5")
    }

    @Test("accessory pushes take their suffix; widgets and controls carry content-changed")
    func newerPushTypes() throws {
        _ = try decoder.decode(
            EventFixtures.event([
                "pushType": "accessory", "topic": "com.example.app.push-type.accessory",
                "payload": ["aps": ["encryptedData": "AAAA"]],
            ]))
        let bare = try problem(EventFixtures.event(["pushType": "accessory", "topic": "com.example.app"]))
        #expect(bare.message == "push type 'accessory' needs the topic <bundle id>.push-type.accessory")
        _ = try decoder.decode(
            EventFixtures.event([
                "pushType": "widgets", "topic": "com.example.app.push-type.widgets",
                "payload": ["aps": ["content-changed": true]],
            ]))
        let widgets = try problem(
            EventFixtures.event([
                "pushType": "controls", "topic": "com.example.app.push-type.controls",
                "payload": ["aps": ["alert": "x"]],
            ]))
        #expect(widgets.description == "/payload/aps: required property 'content-changed' is missing")
    }

    @Test("a typical alert event decodes into the APNs notification")
    func valid() throws {
        let event = try decoder.decode(EventFixtures.event([:]))
        #expect(event.id == "5B0E9A4C-7F2D-4C1E-9A57-0D6C1F4E8B21")
        #expect(event.environment == .production)
        let n = try event.deviceNotification
        #expect(n.deviceToken.hex == EventFixtures.token)
        #expect(n.topic == "com.example.app")
        #expect(n.pushType == .alert)
        #expect(n.priority == .immediate)
        #expect(n.expiration == .at(secondsSince1970: 1_767_225_600))
        #expect(n.collapseID == "order-1234")
        // apns-id derived from a UUID event id, lowercased.
        #expect(n.apnsID?.uuidString == "5b0e9a4c-7f2d-4c1e-9a57-0d6c1f4e8b21")
        #expect(
            String(decoding: n.payload, as: UTF8.self)
                == #"{"aps":{"alert":{"title":"Shipped","body":"Your order is on its way."},"badge":1}}"#)
        #expect(event.metadata == ["tenant": "acme", "trace": [1, 2, 3]])
    }

    @Test("optional fields may be absent; defaults apply")
    func minimal() throws {
        let event = try decoder.decode(
            EventFixtures.event([
                "id": "not-a-uuid", "environment": nil, "priority": nil, "expiration": nil, "collapseId": nil,
                "metadata": nil,
            ]))
        #expect(event.environment == .production)
        #expect(try event.deviceNotification.apnsID == nil)
        #expect(try event.deviceNotification.priority == nil)
        #expect(event.metadata == nil)
    }

    // MARK: JSON itself

    @Test("not JSON: reported at the root with line and column")
    func malformed() throws {
        let p = try problem(Array("{\"id\": \"a\",\n \"deviceToken\": }".utf8))
        #expect(p.kind == .malformedJSON)
        #expect(p.instanceLocation == "")
        #expect(p.keyword == "json")
        #expect(p.line == 2 && p.column == 17)
        let utf8 = try problem([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D])
        #expect(utf8.kind == .malformedJSON)
        #expect(utf8.message.contains("invalid UTF-8"))
        let deep = try problem(
            Array((String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)).utf8))
        #expect(deep.message.contains("nesting deeper"))
    }

    @Test("an event must be an object with the required members")
    func shape() throws {
        let p = try problem(Array("[1]".utf8))
        #expect(p.instanceLocation == "" && p.keyword == "type")
        try expect(["id": nil], at: "", keyword: "required", schemaPointer: "/required")
        try expect(["payload": nil], at: "", keyword: "required")
        try expect(["collapseID": "x"], at: "/collapseID", keyword: "additionalProperties")
        try expect(["id": ""], at: "/id", keyword: "minLength")
        try expect(["id": 7], at: "/id", keyword: "type")
    }

    // MARK: device token

    @Test("device token: hex, even length, any size, case-insensitive")
    func deviceToken() throws {
        try expect(
            ["deviceToken": "74 0f"], at: "/deviceToken", keyword: "pattern",
            schemaPointer: "/properties/deviceToken/pattern")
        try expect(["deviceToken": "abc"], at: "/deviceToken", keyword: "pattern")
        try expect(["deviceToken": "zz"], at: "/deviceToken", keyword: "pattern")
        try expect(["deviceToken": ""], at: "/deviceToken", keyword: "minLength")
        let upper = try decoder.decode(
            EventFixtures.event([
                "deviceToken": "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"
            ]))
        #expect(
            try upper.deviceNotification.deviceToken.hex
                == "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
        #expect(try upper.deviceNotification.deviceToken.path.hasPrefix("/3/device/abcdef"))
        _ = try decoder.decode(EventFixtures.event(["deviceToken": "ab"]))
    }

    // A malformed token's first 40 characters were copied into the result's detail and dlq-detail.
    @Test("a malformed device token is never quoted in the problem, the result detail or the dead letter")
    func malformedTokenIsNotQuoted() throws {
        let token = "0123456789abcdef0123456789abcdef0123456789abcdef-not-hex"
        let error = try #require(throws: EventDecodingError.self) {
            try decoder.decode(EventFixtures.event(["deviceToken": .string(token)]))
        }
        #expect(error.problems[0].instanceLocation == "/deviceToken")
        #expect(error.deadLetterDetail.contains("/deviceToken: the device token (not shown) does not match"))
        #expect(!error.deadLetterDetail.contains("0123456789abcdef"), "\(error.deadLetterDetail)")
    }

    // MARK: push types and topics

    static let suffixes: [(String, String)] = [
        ("voip", ".voip"), ("complication", ".complication"), ("fileprovider", ".pushkit.fileprovider"),
        ("liveactivity", ".push-type.liveactivity"), ("location", ".location-query"), ("pushtotalk", ".voip-ptt"),
        ("widgets", ".push-type.widgets"), ("controls", ".push-type.controls"), ("accessory", ".push-type.accessory"),
    ]

    static func payload(for type: String) -> JSONValue {
        switch type {
        case "alert": ["aps": ["alert": "hi"]]
        case "background": ["aps": ["content-available": 1]]
        case "liveactivity": ["aps": ["timestamp": 1_767_225_600, "event": "update", "content-state": [:]]]
        case "widgets", "controls": ["aps": ["content-changed": true]]
        default: ["data": 1]
        }
    }

    @Test("each push type needs its topic suffix", arguments: suffixes)
    func topicSuffix(type: String, suffix: String) throws {
        let priority: JSONValue = 5
        let ok = try decoder.decode(
            EventFixtures.event([
                "pushType": .string(type), "topic": .string("com.example.app" + suffix), "priority": priority,
                "payload": Self.payload(for: type),
            ]))
        #expect(try ok.deviceNotification.pushType.rawValue == type)
        #expect(try ok.deviceNotification.topic.hasSuffix(suffix))
        let p = try problem(
            EventFixtures.event([
                "pushType": .string(type), "topic": "com.example.app", "priority": priority,
                "payload": Self.payload(for: type),
            ]))
        #expect(p.instanceLocation == "/topic")
        #expect(p.keyword == "pattern")
        #expect(p.schemaLocation?.hasSuffix("/then/properties/topic/pattern") == true)
        // The suffix alone, with no bundle id before it, is not a topic either.
        let bare = try problem(
            EventFixtures.event([
                "pushType": .string(type), "topic": .string(suffix), "priority": priority,
                "payload": Self.payload(for: type),
            ]))
        #expect(bare.instanceLocation == "/topic")
    }

    @Test("alert, background and mdm take the bare topic; unknown types are refused")
    func pushTypes() throws {
        _ = try decoder.decode(
            EventFixtures.event([
                "pushType": "mdm", "topic": "com.apple.mgmt.External.1b4e28ba", "payload": ["mdm": "x"],
            ]))
        _ = try decoder.decode(
            EventFixtures.event(["pushType": "background", "priority": 5, "payload": Self.payload(for: "background")]))
        try expect(["pushType": "banner"], at: "/pushType", keyword: "enum", schemaPointer: "/properties/pushType/enum")
        try expect(["pushType": nil], at: "", keyword: "required")
        try expect(
            ["topic": "com.example app"], at: "/topic", keyword: "pattern", schemaPointer: "/properties/topic/pattern")
        try expect(["topic": ""], at: "/topic", keyword: "minLength")
    }

    // MARK: priority

    @Test("priority is 10, 5 or 1; background never 10")
    func priority() throws {
        try expect(["priority": 7], at: "/priority", keyword: "enum", schemaPointer: "/properties/priority/enum")
        try expect(["priority": "10"], at: "/priority", keyword: "enum")
        try expect(
            ["pushType": "background", "priority": 10, "payload": Self.payload(for: "background")],
            at: "/priority", keyword: "enum")
        let p = try problem(
            EventFixtures.event(["pushType": "background", "priority": 10, "payload": Self.payload(for: "background")]))
        #expect(p.schemaLocation?.hasSuffix("/then/properties/priority/enum") == true)
        for value in [10, 5, 1] {
            _ = try decoder.decode(EventFixtures.event(["priority": .number(JSONNumber(value))]))
        }
        // Background without a priority is sent with 5.
        let bg = try decoder.decode(
            EventFixtures.event(["pushType": "background", "priority": nil, "payload": Self.payload(for: "background")])
        )
        #expect(try bg.deviceNotification.headerPriority == .powerConsidered)
    }

    // MARK: expiration

    @Test("expiration: integer epoch seconds, 0 = do not store")
    func expiration() throws {
        try expect(["expiration": -1], at: "/expiration", keyword: "minimum")
        try expect(["expiration": .number(JSONNumber(1.5)!)], at: "/expiration", keyword: "type")
        try expect(["expiration": "tomorrow"], at: "/expiration", keyword: "type")
        try expect(
            ["expiration": .number(try #require(JSONParser.parse("9223372036854775808").numberValue))],
            at: "/expiration", keyword: "maximum")
        let zero = try decoder.decode(EventFixtures.event(["expiration": 0]))
        #expect(try zero.deviceNotification.expiration == .immediately)
    }

    // MARK: collapse id

    @Test("collapse id: at most 64 bytes of UTF-8")
    func collapseID() throws {
        _ = try decoder.decode(EventFixtures.event(["collapseId": .string(String(repeating: "c", count: 64))]))
        try expect(["collapseId": .string(String(repeating: "c", count: 65))], at: "/collapseId", keyword: "maxLength")
        // 40 characters pass the schema (maxLength counts characters) but are 80 bytes: the code rule.
        try expect(
            ["collapseId": .string(String(repeating: "é", count: 40))], at: "/collapseId", keyword: "badCollapseId",
            kind: .rule)
        try expect(["collapseId": ""], at: "/collapseId", keyword: "minLength")
    }

    @Test("apns.collapseIdFromEventId: a device push without a collapse id gets one from its event id; its own wins")
    func derivedCollapseID() throws {
        var deriving = NotificationEventDecoder.standard
        deriving.derivesCollapseIDs = true
        let plain = try deriving.decode(EventFixtures.event(["collapseId": nil]))
        let derived = try #require(plain.notification?.collapseID)
        #expect(derived.utf8.count == 43 && derived.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(
            try deriving.decode(EventFixtures.event(["collapseId": nil])).notification?.collapseID == derived,
            "the same id, again")
        let other = try deriving.decode(EventFixtures.event(["id": "another-event", "collapseId": nil]))
        #expect(other.notification?.collapseID != derived)
        #expect(try deriving.decode(EventFixtures.event(["collapseId": "score"])).notification?.collapseID == "score")
        #expect(
            try decoder.decode(EventFixtures.event(["collapseId": nil])).notification?.collapseID == nil,
            "off by default")
        // A broadcast takes none (APNs refuses it there).
        #expect(try deriving.decode(EventFixtures.event([:], base: EventFixtures.broadcast)).notification == nil)
    }

    // MARK: payload

    @Test("payload: a non-empty object, at most 4096 bytes (5120 for voip)")
    func payload() throws {
        try expect(["payload": "{\"aps\":{}}"], at: "/payload", keyword: "type")
        try expect(["payload": [:]], at: "/payload", keyword: "minProperties")
        try expect(["payload": ["aps": "alert"]], at: "/payload/aps", keyword: "type")
        let limit = try decoder.decode(EventFixtures.event(["payload": EventFixtures.payload(bytes: 4096)]))
        #expect(try limit.deviceNotification.payload.count == 4096)
        try expect(
            ["payload": EventFixtures.payload(bytes: 4097)], at: "/payload", keyword: "payloadTooLarge", kind: .rule)
        let voip: [String: JSONValue?] = ["pushType": "voip", "topic": "com.example.app.voip"]
        var bigVoip = voip
        bigVoip["payload"] = EventFixtures.payload(bytes: 5120)
        _ = try decoder.decode(EventFixtures.event(bigVoip))
        bigVoip["payload"] = EventFixtures.payload(bytes: 5121)
        try expect(bigVoip, at: "/payload", keyword: "payloadTooLarge", kind: .rule)
    }

    @Test("payload content per push type")
    func payloadContent() throws {
        try expect(["payload": ["data": 1]], at: "/payload", keyword: "required")
        try expect(["payload": ["aps": ["category": "x"]]], at: "/payload/aps", keyword: "anyOf")
        try expect(
            ["pushType": "background", "priority": 5, "payload": ["aps": ["alert": "hi", "content-available": 1]]],
            at: "/payload/aps", keyword: "not")
        try expect(
            ["pushType": "background", "priority": 5, "payload": ["aps": ["content-available": 0]]],
            at: "/payload/aps/content-available", keyword: "const")
        try expect(
            [
                "pushType": "liveactivity", "topic": "com.example.app.push-type.liveactivity", "priority": 5,
                "payload": ["aps": ["timestamp": 1, "event": "pause"]],
            ],
            at: "/payload/aps/event", keyword: "enum")
    }

    // MARK: environment and metadata

    @Test("environment: production or development")
    func environment() throws {
        try expect(["environment": "staging"], at: "/environment", keyword: "enum")
        let dev = try decoder.decode(EventFixtures.event(["environment": "development"]))
        #expect(dev.environment == .development)
        #expect(dev.environment.host == "api.sandbox.push.apple.com")
    }

    @Test("collect-all reports every schema problem, each located")
    func collectAll() throws {
        let problems = decoder.problems(
            in: EventFixtures.event(["priority": 7, "deviceToken": "xyz", "environment": "qa"])[...])
        #expect(Set(problems.map(\.instanceLocation)) == ["/priority", "/deviceToken", "/environment"])
        #expect(problems.allSatisfy { $0.kind == .schema })
    }

    // MARK: broadcasts

    func broadcastProblem(_ changes: [String: JSONValue?]) throws -> EventProblem {
        try problem(EventFixtures.event(changes, base: EventFixtures.broadcast))
    }

    @Test("a channelId instead of a deviceToken makes a Live Activity broadcast to the bare bundle id")
    func broadcastEvent() throws {
        let event = try decoder.decode(EventFixtures.event([:], base: EventFixtures.broadcast))
        let broadcast = try #require(event.broadcast)
        #expect(event.notification == nil)
        #expect(broadcast.bundleID == "com.example.app")
        #expect(broadcast.channelID == "dHN/RUmHFYk9eY+fXzUrJA==")
        #expect(broadcast.priority == .immediate && broadcast.expiration == 0)
        // The event id is a UUID: it becomes apns-request-id, as it becomes a device push's apns-id.
        #expect(broadcast.requestID?.uuidString == "0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9")
        #expect(event.push.topic == "com.example.app" && event.push.recipientKey == "channel:dHN/RUmHFYk9eY+fXzUrJA==")
        #expect(event.metadata == ["match": "m-17"])
        let end = try decoder.decode(
            EventFixtures.event(
                [
                    "id": "not-a-uuid", "priority": 5, "expiration": 1_767_229_200,
                    "payload": ["aps": ["timestamp": 1_767_225_600, "event": "end", "dismissal-date": 1_767_229_200]],
                ],
                base: EventFixtures.broadcast))
        #expect(end.broadcast?.requestID == nil && end.broadcast?.priority == .powerConsidered)
        #expect(end.broadcast?.expiration == 1_767_229_200)
    }

    @Test("broadcast rules, located: one target, liveactivity, bare topic, priority and expiration, no start")
    func broadcastRules() throws {
        let both = try broadcastProblem(["deviceToken": .string(EventFixtures.token)])
        #expect(both.instanceLocation == "" && both.keyword == "oneOf")
        #expect(both.message.contains("never both"), "\(both)")
        let neither = try problem(EventFixtures.event(["deviceToken": nil]))
        #expect(neither.instanceLocation == "" && neither.keyword == "oneOf")
        #expect(
            neither.description
                == "(root): an event goes to one device ('deviceToken') or to a broadcast channel ('channelId'), never both"
        )

        let alert = try broadcastProblem(["pushType": "alert", "payload": ["aps": ["alert": "hi"]]])
        #expect(alert.instanceLocation == "/pushType" && alert.keyword == "const", "\(alert)")
        #expect(alert.message == "a broadcast to a channel is a Live Activity push: pushType 'liveactivity'")

        let suffixed = try broadcastProblem(["topic": "com.example.app.push-type.liveactivity"])
        #expect(suffixed.instanceLocation == "/topic" && suffixed.keyword == "not", "\(suffixed)")
        #expect(suffixed.message.hasPrefix("a broadcast goes to the bare bundle id"))

        // The bundle id is part of the broadcast's request path: only Apple's bundle-id characters.
        for topic in ["com.example/x", "com.example.app?x=1", "com.example#a"] {
            let pathy = try broadcastProblem(["topic": .string(topic)])
            #expect(pathy.instanceLocation == "/topic" && pathy.keyword == "pattern", "\(topic): \(pathy)")
            #expect(pathy.message.contains("letters, digits, '.' and '-'"), "\(pathy)")
        }

        let noPriority = try broadcastProblem(["priority": nil])
        #expect(noPriority.instanceLocation == "" && noPriority.keyword == "required", "\(noPriority)")
        #expect(noPriority.message.contains("'priority'"))
        let noExpiration = try broadcastProblem(["expiration": nil])
        #expect(noExpiration.keyword == "required" && noExpiration.message.contains("'expiration'"), "\(noExpiration)")
        let lowest = try broadcastProblem(["priority": 1])
        #expect(lowest.instanceLocation == "/priority", "\(lowest)")

        let start = try broadcastProblem([
            "payload": [
                "aps": [
                    "timestamp": 1, "event": "start", "attributes-type": "Match", "attributes": [:],
                    "content-state": [:], "alert": ["title": "Kick-off"],
                ]
            ]
        ])
        #expect(start.instanceLocation == "/payload/aps/event" && start.keyword == "enum", "\(start)")
        #expect(start.message == "a broadcast updates or ends a Live Activity; start one with a push to a device token")

        let collapse = try broadcastProblem(["collapseId": "score"])
        #expect(collapse.instanceLocation == "/collapseId" && collapse.message == "a broadcast has no collapse id")

        let badChannel = try broadcastProblem(["channelId": "not base64!"])
        #expect(badChannel.instanceLocation == "/channelId" && badChannel.keyword == "pattern", "\(badChannel)")
        let longChannel = try broadcastProblem(["channelId": .string(String(repeating: "A", count: 65))])
        #expect(longChannel.instanceLocation == "/channelId" && longChannel.keyword == "maxLength")

        // A broadcast payload may have 5,120 bytes (a device Live Activity push 4,096).
        func payload(_ bytes: Int) -> JSONValue {
            let base = #"{"aps":{"timestamp":1,"event":"update","content-state":{"s":""}}}"#.utf8.count
            return [
                "aps": [
                    "timestamp": 1, "event": "update",
                    "content-state": ["s": .string(String(repeating: "x", count: bytes - base))],
                ]
            ]
        }
        let largest = try decoder.decode(EventFixtures.event(["payload": payload(5120)], base: EventFixtures.broadcast))
        #expect(largest.push.payloadBytes == 5120)
        let tooLarge = try broadcastProblem(["payload": payload(5121)])
        #expect(
            tooLarge.instanceLocation == "/payload" && tooLarge.keyword == "payloadTooLarge" && tooLarge.kind == .rule)
    }

    @Test("the error keeps the event id so an invalid result can be keyed")
    func eventIDOnError() throws {
        do {
            _ = try decoder.decode(EventFixtures.event(["priority": 7]))
            Issue.record("accepted")
        } catch {
            #expect(error.eventID == "5B0E9A4C-7F2D-4C1E-9A57-0D6C1F4E8B21")
            #expect(error.kind == .schema)
            #expect(error.deadLetterReason == .schema)
            #expect(error.deadLetterDetail == "/priority: value 7 is not one of 10, 5, 1")
        }
    }
}
