import APNsSimulator
import Foundation
import Testing

/// One broadcast sent with the raw client and the answer the simulator's rules call for.
struct BroadcastCase: Sendable, CustomTestStringConvertible {
    var name: String
    var headers: @Sendable (_ authorization: String) -> [(String, String)] = {
        RawHTTP2Client.broadcastHeaders(authorization: $0)
    }
    var body: String? = Fixture.broadcastPayload
    var status: Int
    var reason: String?
    var testDescription: String { "\(name) → \(status) \(reason ?? "")" }
}

/// Headers of a broadcast with one thing changed.
private func broadcast(
    path: String = "/4/broadcasts/apps/" + Fixture.topic,
    method: String = "POST",
    channelID: String? = Fixture.storedChannel,
    pushType: String? = "liveactivity",
    expiration: String? = "0",
    priority: String? = "10",
    requestID: String? = nil,
    signed: Bool = true,
    extra: [(String, String)] = []
) -> @Sendable (String) -> [(String, String)] {
    { authorization in
        RawHTTP2Client.broadcastHeaders(
            path: path, method: method, channelID: channelID, pushType: pushType, expiration: expiration,
            priority: priority, requestID: requestID, authorization: signed ? authorization : nil, extra: extra)
    }
}

let broadcastCases: [BroadcastCase] = [
    BroadcastCase(name: "a broadcast to a channel of the app", status: 200),
    BroadcastCase(name: "apns-push-type Liveactivity", headers: broadcast(pushType: "Liveactivity"), status: 200),
    BroadcastCase(name: "apns-push-type LiveActivity", headers: broadcast(pushType: "LiveActivity"), status: 200),
    BroadcastCase(name: "apns-push-type LIVEACTIVITY", headers: broadcast(pushType: "LIVEACTIVITY"), status: 200),
    BroadcastCase(name: "apns-priority 5", headers: broadcast(priority: "5"), status: 200),
    BroadcastCase(name: "apns-priority 1", headers: broadcast(priority: "1"), status: 200),
    BroadcastCase(
        name: "a nonzero expiration on a channel that stores the most recent message",
        headers: broadcast(expiration: "1900000000"), status: 200),
    BroadcastCase(name: "a payload of 5120 bytes", body: padded(5120), status: 200),
    BroadcastCase(
        name: "a canonical apns-request-id", headers: broadcast(requestID: "eabeae54-14a8-11e5-b60b-1697f925ec7b"),
        status: 200),
    // the line
    BroadcastCase(name: "GET", headers: broadcast(method: "GET"), status: 405, reason: "MethodNotAllowed"),
    BroadcastCase(
        name: "no bundle ID", headers: broadcast(path: "/4/broadcasts/apps/"), status: 404, reason: "BadPath"),
    BroadcastCase(
        name: "a path below the bundle ID", headers: broadcast(path: "/4/broadcasts/apps/\(Fixture.topic)/x"),
        status: 404, reason: "BadPath"),
    BroadcastCase(
        name: "/4/broadcast/apps (singular)", headers: broadcast(path: "/4/broadcast/apps/\(Fixture.topic)"),
        status: 404, reason: "BadPath"),
    BroadcastCase(
        name: "a bundle ID with a space", headers: broadcast(path: "/4/broadcasts/apps/com.example%20app x"),
        status: 404, reason: "BadPath"),
    BroadcastCase(
        name: "apns-channel-id twice",
        headers: broadcast(extra: [("apns-channel-id", Fixture.storedChannel)]), status: 400,
        reason: "DuplicateHeaders"),
    // credential and app
    BroadcastCase(
        name: "no authorization", headers: broadcast(signed: false), status: 403, reason: "MissingProviderToken"),
    BroadcastCase(
        name: "a bundle ID with the liveactivity push-type suffix",
        headers: broadcast(path: "/4/broadcasts/apps/\(Fixture.topic).push-type.liveactivity"), status: 400,
        reason: "TopicDisallowed"),
    BroadcastCase(
        name: "an app the token's key does not cover",
        headers: broadcast(path: "/4/broadcasts/apps/com.example.stranger"),
        status: 403, reason: "TopicMismatch"),
    BroadcastCase(
        name: "an app without the broadcast capability",
        headers: broadcast(path: "/4/broadcasts/apps/\(Fixture.noBroadcastApp)"), status: 400,
        reason: "FeatureNotEnabled"),
    // headers
    BroadcastCase(
        name: "apns-request-id not a UUID", headers: broadcast(requestID: "1234"), status: 400, reason: "BadMessageId"),
    BroadcastCase(
        name: "apns-request-id uppercase", headers: broadcast(requestID: "EABEAE54-14A8-11E5-B60B-1697F925EC7B"),
        status: 400, reason: "BadMessageId"),
    BroadcastCase(
        name: "no apns-channel-id", headers: broadcast(channelID: nil), status: 400, reason: "MissingChannelId"),
    BroadcastCase(
        name: "apns-channel-id not base64", headers: broadcast(channelID: "not base64!"), status: 400,
        reason: "BadChannelId"),
    BroadcastCase(
        name: "apns-channel-id of a length base64 never has", headers: broadcast(channelID: "abcde"), status: 400,
        reason: "BadChannelId"),
    BroadcastCase(
        name: "apns-channel-id of 68 characters", headers: broadcast(channelID: String(repeating: "QUJD", count: 17)),
        status: 400, reason: "BadChannelId"),
    BroadcastCase(name: "no apns-push-type", headers: broadcast(pushType: nil), status: 400, reason: "MissingPushType"),
    BroadcastCase(
        name: "apns-push-type alert", headers: broadcast(pushType: "alert"), status: 400, reason: "InvalidPushType"),
    BroadcastCase(
        name: "apns-push-type live-activity", headers: broadcast(pushType: "live-activity"), status: 400,
        reason: "InvalidPushType"),
    BroadcastCase(
        name: "no apns-expiration", headers: broadcast(expiration: nil), status: 400, reason: "BadExpirationDate"),
    BroadcastCase(
        name: "apns-expiration not an integer", headers: broadcast(expiration: "tomorrow"), status: 400,
        reason: "BadExpirationDate"),
    BroadcastCase(name: "no apns-priority", headers: broadcast(priority: nil), status: 400, reason: "BadPriority"),
    BroadcastCase(name: "apns-priority 7", headers: broadcast(priority: "7"), status: 400, reason: "BadPriority"),
    // the channel
    BroadcastCase(
        name: "a channel never created", headers: broadcast(channelID: Fixture.unknownChannel), status: 400,
        reason: "ChannelNotRegistered"),
    BroadcastCase(
        name: "a channel of another app", headers: broadcast(channelID: Fixture.otherAppChannel), status: 400,
        reason: "ChannelNotRegistered"),
    BroadcastCase(
        name: "a nonzero expiration on a channel that stores no message",
        headers: broadcast(channelID: Fixture.unstoredChannel, expiration: "1900000000"), status: 400,
        reason: "BadExpirationDate"),
    BroadcastCase(
        name: "expiration 0 on a channel that stores no message",
        headers: broadcast(channelID: Fixture.unstoredChannel), status: 200),
    // the payload
    BroadcastCase(name: "no body", body: nil, status: 400, reason: "PayloadEmpty"),
    BroadcastCase(name: "an empty body", body: "", status: 400, reason: "PayloadEmpty"),
    BroadcastCase(name: "a payload of 5121 bytes", body: padded(5121), status: 413, reason: "PayloadTooLarge"),
    BroadcastCase(name: "a payload of 70000 bytes", body: padded(70000), status: 413, reason: "PayloadTooLarge"),
    BroadcastCase(name: "a payload that is not JSON", body: #"{"aps":"#, status: 400, reason: "BadPayload"),
]

@Suite("Broadcast push on the push listener, through a raw HTTP/2 client")
struct BroadcastTests {
    @Test(
        "each broadcast rule answers its status and reason, with apns-request-id and nothing recorded on refusal",
        arguments: broadcastCases)
    func answers(_ c: BroadcastCase) async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { simulator, push, _ in
            push.send(stream: 1, headers: c.headers(key.authorization()), body: c.body)
            let answer = try await push.response(stream: 1)
            #expect(answer.status == c.status)
            #expect(answer.reason == c.reason, "\(answer.body)")
            #expect(isLowercaseUUID(answer.requestID), "every answer carries apns-request-id")
            #expect(answer.headers.first(name: "apns-id") == nil)
            let counted = simulator.observation.counters[ResponseKey(status: c.status, reason: c.reason)] ?? 0
            #expect(counted == 1)
            if c.status == 200 {
                #expect(answer.body.isEmpty)
                #expect(isLowercaseUUID(answer.headers.first(name: "apns-unique-id")))
                #expect(answer.headers.first(name: "content-type") == nil)
                #expect(simulator.observation.broadcasts.count == 1)
            } else {
                #expect(answer.headers.first(name: "content-type") == "application/json")
                #expect(answer.headers.first(name: "apns-unique-id") == nil)
                #expect(simulator.observation.broadcasts.isEmpty)
                #expect(simulator.observation.broadcastCounts.isEmpty)
            }
        }
    }

    @Test("an accepted broadcast is observed with its channel, ids, payload bytes and headers as received")
    func observation() async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { simulator, push, _ in
            let requestID = "eabeae54-14a8-11e5-b60b-1697f925ec7b"
            let headers = RawHTTP2Client.broadcastHeaders(
                pushType: "LiveActivity", expiration: "1900000000", priority: "5", requestID: requestID,
                authorization: key.authorization(), extra: [("x-trace", "abc")])
            push.send(stream: 1, headers: headers, body: Fixture.broadcastPayload)
            let first = try await push.response(stream: 1)
            #expect(first.status == 200)
            #expect(first.requestID == requestID, "a valid apns-request-id is echoed")
            push.send(
                stream: 3, headers: RawHTTP2Client.broadcastHeaders(authorization: key.authorization()),
                body: Fixture.broadcastPayload)
            let second = try await push.response(stream: 3)
            #expect(isLowercaseUUID(second.requestID), "without one the simulator makes one up")
            #expect(second.requestID != first.requestID)
            #expect(second.headers.first(name: "apns-unique-id") != first.headers.first(name: "apns-unique-id"))

            #expect(simulator.observation.broadcastCount(channelID: Fixture.storedChannel) == 2)
            #expect(simulator.observation.broadcastCount(channelID: Fixture.unstoredChannel) == 0)
            #expect(simulator.observation.records.isEmpty, "broadcasts are not device notifications")
            let record = try #require(simulator.observation.broadcasts.first)
            #expect(record.bundleID == Fixture.topic)
            #expect(record.channelID == Fixture.storedChannel)
            #expect(record.requestID == requestID)
            #expect(record.uniqueID == first.headers.first(name: "apns-unique-id"))
            #expect(record.pushType == "LiveActivity")
            #expect(record.expiration == 1_900_000_000)
            #expect(record.priority == 5)
            #expect(record.payload == Array(Fixture.broadcastPayload.utf8))
            #expect(record.headers.map(\.name) == headers.map(\.0))
            #expect(record.headers.contains { $0.name == "x-trace" && $0.value == "abc" })
            #expect(simulator.observation.summary().contains("broadcasts \(Fixture.storedChannel) 2"))
        }
    }

    @Test("a broadcast is answered on the push listener only; device pushes keep working beside it")
    func listeners() async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { simulator, push, management in
            management.send(
                stream: 1, headers: RawHTTP2Client.broadcastHeaders(authorization: key.authorization()),
                body: Fixture.broadcastPayload)
            let onManagement = try await management.response(stream: 1)
            #expect(onManagement.status == 404)
            #expect(onManagement.reason == "BadPath")
            push.send(stream: 1, headers: RawHTTP2Client.apnsHeaders(authorization: key.authorization()))
            let device = try await push.response(stream: 1)
            #expect(device.status == 200)
            #expect(device.headers.first(name: "apns-id") != nil, "device pushes still answer apns-id")
            push.send(
                stream: 3, headers: RawHTTP2Client.broadcastHeaders(authorization: key.authorization()),
                body: Fixture.broadcastPayload)
            #expect(try await push.response(stream: 3).status == 200)
            #expect(simulator.observation.records.count == 1)
            #expect(simulator.observation.broadcasts.count == 1)
        }
    }

    @Test("a certificate of the app broadcasts without a token; one of another app gets TopicMismatch")
    func certificateTrust() async throws {
        try await expectCertificateTrust(
            ownTopics: [Fixture.topic, Fixture.topic + ".voip"], success: 200, port: { $0.port },
            headers: RawHTTP2Client.broadcastHeaders(authorization: nil), body: Fixture.broadcastPayload)
    }

    @Test("faults reach broadcasts: a script per channel, the global script, rates, and Apple's spelled-out 503")
    func faults() async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { simulator, push, _ in
            var stream = 1
            func send(_ channel: String = Fixture.storedChannel) async throws -> RawResponse {
                defer { stream += 2 }
                push.send(
                    stream: stream,
                    headers: RawHTTP2Client.broadcastHeaders(channelID: channel, authorization: key.authorization()),
                    body: Fixture.broadcastPayload)
                return try await push.response(stream: stream)
            }
            simulator.faults.script(channelID: Fixture.storedChannel, [.featureNotEnabled, nil, .tooManyRequests])
            #expect(try await send(Fixture.unstoredChannel).status == 200, "another channel's script")
            #expect(try await send().reason == "FeatureNotEnabled")
            #expect(try await send().status == 200)
            let throttled = try await send()
            #expect(throttled.status == 429)
            #expect(throttled.reason == "TooManyRequests")
            #expect(isLowercaseUUID(throttled.requestID))

            simulator.faults.script([.channelNotRegistered])
            #expect(try await send().reason == "ChannelNotRegistered")
            simulator.faults.setRate(try #require(SimulatorReason(named: "Service Unavailable")), 1)
            let unavailable = try await send()
            #expect(unavailable.status == 503)
            #expect(unavailable.body == #"{"reason":"Service Unavailable"}"#)
            simulator.faults.clear()
            #expect(try await send().status == 200)
            #expect(simulator.observation.broadcastCount(channelID: Fixture.storedChannel) == 2)
        }
    }

    @Test("a channel-management path on the push listener is BadPath")
    func managementPathOnThePushListener() async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { _, push, _ in
            push.send(
                stream: 1,
                headers: RawHTTP2Client.managementHeaders(method: "POST", authorization: key.authorization()),
                body: Fixture.createBody)
            let answer = try await push.response(stream: 1)
            #expect(answer.status == 404)
            #expect(answer.reason == "BadPath")
        }
    }
}
