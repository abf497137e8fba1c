import Foundation
import APNsSimulator
import JSONSchema
import Kafka
import ReliabilityMatrix
import Testing
import Worker
import WorkerDemo

/// The published contracts are what is emitted: every path of the outcome table (and every kind of
/// invalid event) runs through a real worker, and each result event and dead-letter header set it
/// publishes is checked against the schema files in schemas/, as a downstream consumer would.
@Suite(
    "Contracts: every emitted result and dead letter validates against schemas/", .serialized, .timeLimit(.minutes(5)))
struct ContractTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func schema(_ name: String) throws -> JSONSchema {
        let text = try String(contentsOf: repository.appendingPathComponent("schemas/\(name)"), encoding: .utf8)
        return try JSONSchema(text: text, options: .init(formatAssertion: true))
    }

    /// A dead letter's headers as the JSON object dead-letter-headers.schema.json describes.
    static func headerObject(_ record: KafkaConsumerMessage) -> JSONValue {
        var members: [(String, JSONValue)] = []
        for header in record.headers where !members.contains(where: { $0.0 == header.key }) {
            members.append((header.key, .string(record.headers.lastString(header.key) ?? "")))
        }
        return .object(JSONObject(members))
    }

    static func event(_ id: String, token: Int, _ members: String, topic: String = EmbeddedStack.bundleID)
        -> KafkaProducerMessage
    {
        KafkaProducerMessage(
            topic: EmbeddedStack.inputTopic, key: Array(id.utf8),
            value: Array(
                #"{"id":"\#(id)","deviceToken":"\#(Samples.deviceToken(token))","topic":"\#(topic)",\#(members)}"#.utf8)
        )
    }

    /// An event whose record's key is not its id.
    static func keyed(_ key: String, id: String, token: Int, _ members: String) -> KafkaProducerMessage {
        var message = event(id, token: token, members)
        message.key = Array(key.utf8)
        return message
    }

    /// A Live Activity update broadcast to `channel` (the bare bundle id, priority and expiration).
    static func broadcast(_ id: String, channel: String, expiration: Int = 0) -> KafkaProducerMessage {
        let payload = #"{"aps":{"timestamp":1767225600,"event":"update","content-state":{"score":"2-1"}}}"#
        return KafkaProducerMessage(
            topic: EmbeddedStack.inputTopic, key: Array(id.utf8),
            value: Array(
                #"{"id":"\#(id)","channelId":"\#(channel)","topic":"\#(EmbeddedStack.bundleID)","pushType":"liveactivity","priority":10,"expiration":\#(expiration),"payload":\#(payload)}"#
                    .utf8))
    }

    static func raw(_ key: String, _ value: [UInt8]?) -> KafkaProducerMessage {
        KafkaProducerMessage(topic: EmbeddedStack.inputTopic, key: Array(key.utf8), value: value)
    }

    @Test(
        "every outcome and every invalid kind: results match result-event.schema.json, dead letters dead-letter-headers.schema.json"
    )
    func everyPath() async throws {
        let resultSchema = try Self.schema("result-event.schema.json")
        let headerSchema = try Self.schema("dead-letter-headers.schema.json")
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.devices.policy = .accept
        let now = Date().timeIntervalSince1970
        simulator.devices.unregister(Samples.deviceToken(2), at: now - 3600)
        simulator.faults.script(deviceToken: Samples.deviceToken(3), [.badDeviceToken])
        simulator.faults.script(deviceToken: Samples.deviceToken(4), [.badPath])
        simulator.faults.script(deviceToken: Samples.deviceToken(5), [.methodNotAllowed])
        simulator.faults.script(deviceToken: Samples.deviceToken(6), [.payloadTooLarge])
        simulator.faults.script(deviceToken: Samples.deviceToken(7), [.invalidProviderToken])
        simulator.faults.script(deviceToken: Samples.deviceToken(8), Array(repeating: .serviceUnavailable, count: 5))
        simulator.faults.script(deviceToken: Samples.deviceToken(9), Array(repeating: .tooManyRequests, count: 5))
        simulator.faults.script(deviceToken: Samples.deviceToken(10), Array(repeating: .internalServerError, count: 5))
        simulator.faults.script(deviceToken: Samples.deviceToken(11), Array(repeating: .serviceUnavailable, count: 5))
        // Answers the worker retries besides 429, 500 and 503, until retries or the expiration run
        // out: a 5xx Apple's tables do not list (a gateway's), 400 IdleTimeout (the connection's,
        // not the notification's) and 403 UnrelatedKeyIdInToken; and a 4xx Apple's tables do not list,
        // which is not retried.
        let badGateway = SimulatorReason("BadGateway", status: 502)
        simulator.faults.script(deviceToken: Samples.deviceToken(18), Array(repeating: badGateway, count: 5))
        simulator.faults.script(deviceToken: Samples.deviceToken(19), Array(repeating: .idleTimeout, count: 5))
        simulator.faults.script(
            deviceToken: Samples.deviceToken(20), Array(repeating: .unrelatedKeyIdInToken, count: 5))
        simulator.faults.script(deviceToken: Samples.deviceToken(21), Array(repeating: badGateway, count: 5))
        simulator.faults.script(deviceToken: Samples.deviceToken(22), Array(repeating: .idleTimeout, count: 5))
        simulator.faults.script(deviceToken: Samples.deviceToken(23), [SimulatorReason("Unauthorized", status: 401)])
        // Broadcast channels: one that stores nothing (expiration must be 0), one deleted, and one
        // whose broadcasts meet 503s until retries run out.
        let channel = try simulator.channels.create(bundleID: EmbeddedStack.bundleID, storagePolicy: .noMessageStored)
            .id
        let deleted = try simulator.channels.create(bundleID: EmbeddedStack.bundleID, storagePolicy: .noMessageStored)
            .id
        #expect(simulator.channels.delete(deleted, bundleID: EmbeddedStack.bundleID))
        let busy = try simulator.channels.create(
            bundleID: EmbeddedStack.bundleID, storagePolicy: .mostRecentMessageStored
        ).id
        simulator.faults.script(channelID: busy, Array(repeating: .serviceUnavailable, count: 5))

        let alert = #""pushType":"alert","payload":{"aps":{"alert":"hi"}}"#
        let big = String(repeating: "x", count: 5_000)
        // id → (outcome, reason) expected; ids that cannot be read are the records' keys.
        let cases: [(KafkaProducerMessage, ResultOutcome, String?)] = [
            (Self.event("delivered", token: 1, alert), .delivered, nil),
            (Self.event("unregistered", token: 2, alert), .unregistered, "Unregistered"),
            (Self.event("bad-token", token: 3, alert), .rejected, "BadDeviceToken"),
            (Self.event("bad-path", token: 4, alert), .rejected, "BadPath"),
            (Self.event("method", token: 5, alert), .rejected, "MethodNotAllowed"),
            (Self.event("too-large-apns", token: 6, alert), .rejected, "PayloadTooLarge"),
            (Self.event("no-credential", token: 12, alert, topic: "com.other.app"), .rejected, "noCredentialForTopic"),
            (Self.event("credentials", token: 7, alert), .failed, "InvalidProviderToken"),
            (Self.event("exhausted-503", token: 8, alert), .failed, "ServiceUnavailable"),
            (Self.event("exhausted-429", token: 9, alert), .failed, "TooManyRequests"),
            (Self.event("exhausted-500", token: 10, alert), .failed, "InternalServerError"),
            (Self.event("expired", token: 11, #""expiration":1,"# + alert), .expired, "ServiceUnavailable"),
            (Self.event("exhausted-502", token: 18, alert), .failed, "BadGateway"),
            (Self.event("exhausted-idle", token: 19, alert), .failed, "IdleTimeout"),
            (Self.event("exhausted-unrelated-key", token: 20, alert), .failed, "UnrelatedKeyIdInToken"),
            (Self.event("expired-502", token: 21, #""expiration":1,"# + alert), .expired, "BadGateway"),
            (Self.event("expired-idle", token: 22, #""expiration":1,"# + alert), .expired, "IdleTimeout"),
            (Self.event("rejected-401", token: 23, alert), .rejected, "Unauthorized"),
            (
                Samples.alert(
                    id: "stale", deviceToken: Samples.deviceToken(13),
                    timestampMilliseconds: Int64((now - 8 * 3600) * 1000)), .expired, "staleEvent"
            ),
            (Self.broadcast("broadcast", channel: channel), .delivered, nil),
            (
                Self.broadcast("broadcast-stored", channel: channel, expiration: 4_102_444_800), .rejected,
                "BadExpirationDate"
            ),
            (Self.broadcast("broadcast-deleted", channel: deleted), .rejected, "ChannelNotRegistered"),
            (Self.broadcast("broadcast-exhausted", channel: busy), .failed, "ServiceUnavailable"),
            (Self.broadcast("broadcast-invalid", channel: "not base64!"), .invalid, "schema"),
            (Self.raw("malformed", Array(#"{"id":"malformed""#.utf8)), .invalid, "malformedJSON"),
            (Self.raw("no-value", nil), .invalid, "malformedJSON"),
            (
                Self.raw("record-too-large", Array(repeating: UInt8(ascii: " "), count: 30_000)), .invalid,
                "recordTooLarge"
            ),
            (Self.event("schema", token: 14, #""pushType":"alert","payload":{"aps":{}}"#), .invalid, "schema"),
            (Self.event("priority", token: 15, #""priority":"10","# + alert), .invalid, "schema"),
            // A member name with a space: the detail's JSON pointer holds it as it is.
            (Self.event("member-name", token: 24, #""two words":1,"# + alert), .invalid, "schema"),
            // Ids the event schema refuses (empty, longer than 256): results and dead letters carry
            // them as they were read. The empty one is found by its record's key.
            (Self.keyed("empty-id", id: "", token: 25, alert), .invalid, "schema"),
            (Self.event(String(repeating: "i", count: 300), token: 26, alert), .invalid, "schema"),
            (
                Self.event("payload-size", token: 16, #""pushType":"alert","payload":{"aps":{"alert":"\#(big)"}}"#),
                .invalid, "payloadTooLarge"
            ),
            (
                Self.event("collapse", token: 17, #""collapseId":"\#(String(repeating: "é", count: 40))","# + alert),
                .invalid, "badCollapseId"
            ),
        ]
        try await harness.produce(cases.map(\.0))
        let worker = try harness.startWorker(group: "contract") { configuration in
            configuration.delivery.retry.maxAttempts = 3
            configuration.delivery.retry.initialBackoff = .milliseconds(10)
            configuration.delivery.retry.maxBackoff = .milliseconds(50)
            configuration.delivery.maxRecordBytes = 20_000
        }
        let results = try await harness.results(cases.count)
        let deadLetters = try await harness.deadLetters(cases.filter { [.failed, .invalid].contains($0.1) }.count + 1)
        try await worker.stop()

        var seen: Set<String> = []
        for result in results {
            let key = String(decoding: result.record.key ?? [], as: UTF8.self)
            seen.insert(key)
            let value = try JSONParser.parse(result.record.value ?? [])
            let errors = resultSchema.validate(value, mode: .allErrors)
            #expect(
                errors.isEmpty,
                "\(key): \(errors.map(\.description)) in \(String(decoding: result.record.value ?? [], as: UTF8.self))")
            let expected = try #require(cases.first { String(decoding: $0.0.key ?? [], as: UTF8.self) == key })
            #expect(result.outcome == expected.1, "\(key)")
            #expect(result.reason == expected.2, "\(key)")
        }
        #expect(seen.count == cases.count)
        for deadLetter in deadLetters {
            let errors = headerSchema.validate(Self.headerObject(deadLetter), mode: .allErrors)
            #expect(
                errors.isEmpty, "\(deadLetter.headers.lastString("dlq-event-id") ?? "?"): \(errors.map(\.description))")
        }
        #expect(
            Set(deadLetters.compactMap { $0.headers.lastString("dlq-reason") })
                == [
                    "credentials", "retries-exhausted", "no-credential", "malformed-json", "record-too-large", "schema",
                    "rule",
                ])
        // Results, dead letters and the dead-letter metric join on one spelling: a dead-lettered
        // event's result says its dead letter's dlq-reason; the others say none.
        var letterReasons: [String: String] = [:]
        for letter in deadLetters {
            letterReasons[String(decoding: letter.key ?? [], as: UTF8.self)] = letter.headers.lastString("dlq-reason")
        }
        for result in results {
            let key = String(decoding: result.record.key ?? [], as: UTF8.self)
            let object = try #require(try JSONParser.parse(result.record.value ?? []).objectValue)
            #expect(object["deadLetterReason"]?.stringValue == letterReasons[key], "\(key)")
        }
        // A rejection says what Apple's reason means, not only the status.
        let badToken = try #require(results.first { $0.eventID == "bad-token" })
        #expect(
            badToken.detail?.hasPrefix("APNs answered 400 BadDeviceToken: the device token is bad") == true,
            "\(badToken.detail ?? "")")
        let refused = try #require(results.first { $0.eventID == "credentials" })
        #expect(refused.detail?.contains("InvalidProviderToken: the provider token is not valid") == true)
        // Nothing sent: no credential, a stale record, invalid events.
        for id in ["no-credential", "stale", "schema", "collapse", "broadcast-invalid"] {
            #expect(results.first { $0.eventID == id }?.attempts == 0, "\(id)")
        }
        // A broadcast's result carries what APNs answered: apns-request-id and apns-unique-id, no apns-id.
        let broadcast = try #require(results.first { $0.eventID == "broadcast" })
        let object = try #require(try JSONParser.parse(broadcast.record.value ?? []).objectValue)
        let accepted = try #require(simulator.observation.broadcasts.first { $0.channelID == channel })
        #expect(object["apnsRequestId"]?.stringValue == accepted.requestID)
        #expect(object["apnsUniqueId"]?.stringValue == accepted.uniqueID)
        #expect(object["apnsId"] == .null)
    }
}
