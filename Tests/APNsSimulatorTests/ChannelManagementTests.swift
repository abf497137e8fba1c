import APNsSimulator
import Foundation
import Testing

/// One channel-management request sent with the raw client and the answer the simulator's rules call for.
struct ManagementCase: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String? = "GET"
    var bundleID = Fixture.topic
    var endpoint = "channels"
    var path: String?
    var channelID: String? = Fixture.storedChannel
    var requestID: String?
    var signed = true
    var extra: [(String, String)] = []
    var body: String?
    var status: Int
    var reason: String?
    var testDescription: String { "\(name) → \(status) \(reason ?? "")" }
}

let managementCases: [ManagementCase] = [
    // the line
    ManagementCase(name: "PUT on channels", method: "PUT", status: 405, reason: "MethodNotAllowed"),
    ManagementCase(name: "no :method", method: nil, status: 405, reason: "MethodNotAllowed"),
    ManagementCase(
        name: "POST on all-channels", method: "POST", endpoint: "all-channels", body: Fixture.createBody, status: 405,
        reason: "MethodNotAllowed"),
    ManagementCase(
        name: "DELETE on all-channels", method: "DELETE", endpoint: "all-channels", status: 405,
        reason: "MethodNotAllowed"),
    ManagementCase(name: "an unknown endpoint", endpoint: "channel", status: 404, reason: "BadPath"),
    ManagementCase(name: "no endpoint", path: "/1/apps/\(Fixture.topic)", status: 404, reason: "BadPath"),
    ManagementCase(
        name: "a path below channels", path: "/1/apps/\(Fixture.topic)/channels/x", status: 404, reason: "BadPath"),
    ManagementCase(name: "no bundle ID", path: "/1/apps//channels", status: 404, reason: "BadPath"),
    ManagementCase(name: "a device path", path: "/3/device/" + Fixture.device, status: 404, reason: "BadPath"),
    ManagementCase(
        name: "a broadcast path", method: "POST", path: "/4/broadcasts/apps/" + Fixture.topic,
        body: Fixture.broadcastPayload, status: 404, reason: "BadPath"),
    ManagementCase(
        name: "apns-channel-id twice", extra: [("apns-channel-id", Fixture.storedChannel)], status: 400,
        reason: "DuplicateHeaders"),
    // credential and app
    ManagementCase(name: "no authorization", signed: false, status: 403, reason: "MissingProviderToken"),
    ManagementCase(
        name: "create for a bundle ID with a push-type suffix", method: "POST",
        bundleID: Fixture.topic + ".push-type.liveactivity", body: Fixture.createBody, status: 400,
        reason: "TopicDisallowed"),
    ManagementCase(
        name: "list for an app the token's key does not cover", bundleID: Fixture.strangerApp,
        endpoint: "all-channels", status: 403, reason: "TopicMismatch"),
    ManagementCase(
        name: "create for an app without the broadcast capability", method: "POST", bundleID: Fixture.noBroadcastApp,
        body: Fixture.createBody, status: 400, reason: "FeatureNotEnabled"),
    ManagementCase(
        name: "list for an app without the broadcast capability", bundleID: Fixture.noBroadcastApp,
        endpoint: "all-channels", status: 400, reason: "FeatureNotEnabled"),
    ManagementCase(
        name: "read for an app without the broadcast capability", bundleID: Fixture.noBroadcastApp, status: 400,
        reason: "FeatureNotEnabled"),
    ManagementCase(name: "apns-request-id not a UUID", requestID: "1234", status: 400, reason: "BadMessageId"),
    // read and delete
    ManagementCase(name: "read without apns-channel-id", channelID: nil, status: 400, reason: "MissingChannelId"),
    ManagementCase(
        name: "read with apns-channel-id not base64", channelID: "%%%%", status: 400, reason: "BadChannelId"),
    ManagementCase(
        name: "read of a channel never created", channelID: Fixture.unknownChannel, status: 400,
        reason: "ChannelNotRegistered"),
    ManagementCase(
        name: "read of another app's channel", channelID: Fixture.otherAppChannel, status: 400,
        reason: "ChannelNotRegistered"),
    ManagementCase(
        name: "delete without apns-channel-id", method: "DELETE", channelID: nil, status: 400,
        reason: "MissingChannelId"),
    ManagementCase(
        name: "delete with apns-channel-id too long", method: "DELETE",
        channelID: String(repeating: "QUJD", count: 17), status: 400, reason: "BadChannelId"),
    ManagementCase(
        name: "delete of a channel never created", method: "DELETE", channelID: Fixture.unknownChannel, status: 400,
        reason: "ChannelNotRegistered"),
    // create
    ManagementCase(name: "create", method: "POST", channelID: nil, body: Fixture.createBody, status: 201),
    ManagementCase(
        name: "create with push-type liveactivity (node-apn's spelling)", method: "POST",
        body: #"{"message-storage-policy":0,"push-type":"liveactivity"}"#, status: 201),
    ManagementCase(name: "create without a body", method: "POST", status: 400, reason: "BadRequestPayload"),
    ManagementCase(
        name: "create with a body not JSON", method: "POST", body: "{", status: 400, reason: "BadRequestPayload"),
    ManagementCase(
        name: "create with a JSON array", method: "POST", body: "[1]", status: 400, reason: "BadRequestPayload"),
    ManagementCase(
        name: "create with an unknown attribute", method: "POST",
        body: #"{"message-storage-policy":1,"push-type":"LiveActivity","name":"x"}"#, status: 400,
        reason: "BadRequestParams"),
    ManagementCase(
        name: "create with storage policy 2", method: "POST",
        body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#, status: 400, reason: "BadRequestParams"),
    ManagementCase(
        name: "create without a storage policy", method: "POST", body: #"{"push-type":"LiveActivity"}"#, status: 400,
        reason: "BadRequestParams"),
    ManagementCase(
        name: "create without push-type", method: "POST", body: #"{"message-storage-policy":1}"#, status: 400,
        reason: "MissingPushType"),
    ManagementCase(
        name: "create with push-type alert", method: "POST", body: #"{"message-storage-policy":1,"push-type":"alert"}"#,
        status: 400, reason: "InvalidPushType"),
    ManagementCase(
        name: "create with a body over 5120 bytes", method: "POST", body: padded(5121), status: 413,
        reason: "PayloadTooLarge"),
]

@Suite("Channel management on its own listener, through a raw HTTP/2 client")
struct ChannelManagementTests {
    @Test(
        "each channel-management rule answers its status and reason, with apns-request-id", arguments: managementCases)
    func answers(_ c: ManagementCase) async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { simulator, _, management in
            let headers = RawHTTP2Client.managementHeaders(
                method: c.method, bundleID: c.bundleID, endpoint: c.endpoint, path: c.path, channelID: c.channelID,
                requestID: c.requestID, authorization: c.signed ? key.authorization() : nil, extra: c.extra)
            management.send(stream: 1, headers: headers, body: c.body)
            let answer = try await management.response(stream: 1)
            #expect(answer.status == c.status)
            #expect(answer.reason == c.reason, "\(answer.body)")
            #expect(isLowercaseUUID(answer.requestID), "every answer carries apns-request-id")
            #expect(answer.headers.first(name: "apns-id") == nil)
            #expect(simulator.observation.counters[ResponseKey(status: c.status, reason: c.reason)] == 1)
            let channels = simulator.channels.channels(bundleID: c.bundleID)
            if c.status == 201 {
                #expect(answer.body.isEmpty)
                let id = try #require(answer.headers.first(name: "apns-channel-id"))
                #expect(channels.map(\.id).contains(id))
            } else {
                #expect(answer.headers.first(name: "content-type") == "application/json")
                #expect(answer.headers.first(name: "apns-channel-id") == nil)
                #expect(channels.count == (c.bundleID == Fixture.topic ? 2 : 0), "nothing created or deleted")
            }
        }
    }

    @Test("create, read, list, broadcast, delete: the whole life of a channel across both listeners")
    func lifecycle() async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { simulator, push, management in
            var stream = 1
            func manage(_ method: String, endpoint: String = "channels", channelID: String? = nil, body: String? = nil)
                async throws -> RawResponse
            {
                defer { stream += 2 }
                management.send(
                    stream: stream,
                    headers: RawHTTP2Client.managementHeaders(
                        method: method, endpoint: endpoint, channelID: channelID,
                        requestID: "123e4567-e89b-12d3-a456-4266554400a0", authorization: key.authorization()),
                    body: body)
                let answer = try await management.response(stream: stream)
                #expect(answer.requestID == "123e4567-e89b-12d3-a456-4266554400a0", "the request's id is echoed")
                return answer
            }
            let created = try await manage("POST", body: #"{"push-type":"LiveActivity","message-storage-policy":0}"#)
            #expect(created.status == 201)
            #expect(created.body.isEmpty)
            let id = try #require(created.headers.first(name: "apns-channel-id"))
            #expect(Data(base64Encoded: id) != nil, "a base64 id")

            let read = try await manage("GET", channelID: id)
            #expect(read.status == 200)
            #expect(read.headers.first(name: "content-type") == "application/json")
            #expect(read.json?["message-storage-policy"] as? Int == 0)
            #expect(read.json?["push-type"] as? String == "LiveActivity")
            #expect(read.json?.count == 2, "no channel id in the read answer")

            let list = try await manage("GET", endpoint: "all-channels")
            #expect(list.status == 200)
            #expect(list.json?["channels"] as? [String] == [Fixture.storedChannel, Fixture.unstoredChannel, id])

            push.send(
                stream: 1, headers: RawHTTP2Client.broadcastHeaders(channelID: id, authorization: key.authorization()),
                body: Fixture.broadcastPayload)
            #expect(try await push.response(stream: 1).status == 200)
            #expect(simulator.observation.broadcastCount(channelID: id) == 1)

            let deleted = try await manage("DELETE", channelID: id)
            #expect(deleted.status == 204)
            #expect(deleted.body.isEmpty)
            #expect(try await manage("GET", channelID: id).reason == "ChannelNotRegistered")
            #expect(try await manage("DELETE", channelID: id).reason == "ChannelNotRegistered")
            let after = try await manage("GET", endpoint: "all-channels")
            #expect(after.json?["channels"] as? [String] == [Fixture.storedChannel, Fixture.unstoredChannel])
            push.send(
                stream: 3, headers: RawHTTP2Client.broadcastHeaders(channelID: id, authorization: key.authorization()),
                body: Fixture.broadcastPayload)
            #expect(try await push.response(stream: 3).reason == "ChannelNotRegistered")
            #expect(simulator.channels.channel(id) == nil)
            #expect(simulator.observation.count(status: 201) == 1)
            #expect(simulator.observation.count(status: 204) == 1)
        }
    }

    @Test("an app gets at most the channel limit; a deleted channel frees its place")
    func channelLimit() async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key, { $0.channelLimit = 3 }) { simulator, _, management in
            var stream = 1
            func create() async throws -> RawResponse {
                defer { stream += 2 }
                management.send(
                    stream: stream,
                    headers: RawHTTP2Client.managementHeaders(method: "POST", authorization: key.authorization()),
                    body: Fixture.createBody)
                return try await management.response(stream: stream)
            }
            #expect(try await create().status == 201, "two channels exist, the limit is three")
            let refused = try await create()
            #expect(refused.status == 400)
            #expect(refused.reason == "CannotCreateChannelConfig")
            #expect(simulator.channels.count(bundleID: Fixture.topic) == 3)
            simulator.channels.delete(Fixture.unstoredChannel, bundleID: Fixture.topic)
            #expect(try await create().status == 201)
            simulator.channels.limit = 5
            #expect(try await create().status == 201)
            #expect(simulator.channels.count(bundleID: Fixture.otherApp) == 1, "the limit is per app")
        }
    }

    @Test("channel ids are random base64, and a deleted id never comes back")
    func channelIDs() throws {
        let registry = ChannelRegistry(limit: 100)
        var seen: Set<String> = []
        for _ in 0..<50 {
            let channel = try registry.create(bundleID: Fixture.topic, storagePolicy: .noMessageStored)
            #expect(Data(base64Encoded: channel.id)?.count == 16)
            seen.insert(channel.id)
            #expect(registry.delete(channel.id, bundleID: Fixture.topic))
        }
        #expect(seen.count == 50)
        #expect(registry.count(bundleID: Fixture.topic) == 0)
        let chosen = try registry.create(bundleID: Fixture.topic, storagePolicy: .noMessageStored, id: "QUJD")
        #expect(chosen.id == "QUJD")
        registry.delete("QUJD", bundleID: Fixture.topic)
        #expect(throws: SimulatorReason.badChannelId) {
            try registry.create(bundleID: Fixture.topic, storagePolicy: .noMessageStored, id: "QUJD")
        }
        #expect(throws: SimulatorReason.badChannelId) {
            try registry.create(bundleID: Fixture.topic, storagePolicy: .noMessageStored, id: "not base64")
        }
    }

    @Test("taking an app's broadcast capability deletes its channels; giving it back does not restore them")
    func capability() async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { simulator, push, management in
            simulator.channels.setBroadcastEnabled(false, bundleID: Fixture.topic)
            #expect(simulator.channels.channels(bundleID: Fixture.topic).isEmpty)
            push.send(
                stream: 1, headers: RawHTTP2Client.broadcastHeaders(authorization: key.authorization()),
                body: Fixture.broadcastPayload)
            let refused = try await push.response(stream: 1)
            #expect(refused.reason == "FeatureNotEnabled")
            simulator.channels.setBroadcastEnabled(true, bundleID: Fixture.topic)
            push.send(
                stream: 3, headers: RawHTTP2Client.broadcastHeaders(authorization: key.authorization()),
                body: Fixture.broadcastPayload)
            #expect(try await push.response(stream: 3).reason == "ChannelNotRegistered")
            management.send(
                stream: 1,
                headers: RawHTTP2Client.managementHeaders(
                    method: "GET", endpoint: "all-channels", authorization: key.authorization()),
                body: nil)
            #expect(try await management.response(stream: 1).json?["channels"] as? [String] == [])
            do {
                try simulator.channels.create(
                    bundleID: Fixture.topic, storagePolicy: .noMessageStored, id: Fixture.storedChannel)
                Issue.record("a deleted id came back")
            } catch {
                #expect(error as? SimulatorReason == .badChannelId, "a deleted id stays retired")
            }
        }
    }

    @Test("a fault takes the place of a create, which then creates nothing")
    func faults() async throws {
        let key = TestSigningKey()
        try await withBroadcastConnections(key: key) { simulator, _, management in
            simulator.faults.script([.tooManyRequests, .internalServerError])
            for (stream, status) in [(1, 429), (3, 500), (5, 201)] {
                management.send(
                    stream: stream,
                    headers: RawHTTP2Client.managementHeaders(method: "POST", authorization: key.authorization()),
                    body: Fixture.createBody)
                let answer = try await management.response(stream: stream)
                #expect(answer.status == status)
                #expect(isLowercaseUUID(answer.requestID))
            }
            #expect(simulator.channels.count(bundleID: Fixture.topic) == 3)
        }
    }

    @Test("a certificate of the app manages its channels without a token; one of another app gets TopicMismatch")
    func certificateTrust() async throws {
        try await expectCertificateTrust(
            ownTopics: [Fixture.topic], success: 201, port: { $0.managementPort },
            headers: RawHTTP2Client.managementHeaders(method: "POST", authorization: nil), body: Fixture.createBody)
    }

    @Test("a preset channel that cannot be made stops the start with a message")
    func badPreset() async throws {
        let dir = try TemporaryDirectory()
        var config = SimulatorConfiguration(tls: .directory(dir.path + "/tls"))
        config.channels = [.init(bundleID: Fixture.topic, storagePolicy: .noMessageStored, id: "no!")]
        await #expect(throws: APNsSimulatorConfigurationError.self) { _ = try await Simulator.start(config) }
    }
}
