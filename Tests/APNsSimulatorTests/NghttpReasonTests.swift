import APNsSimulator
import Foundation
import Testing

/// One request sent with `nghttp` (Debian's nghttp2-client) and the answer Apple's tables call for.
struct ReasonCase: Sendable, CustomTestStringConvertible {
    enum Auth: Sendable {
        case valid
        case none
        case issuedAt(secondsAgo: Double)
        case otherKey
        case unknownKeyID
        case garbage
    }

    var name: String
    var path = "/3/device/" + Fixture.device
    var headers: [String] = ["apns-topic: \(Fixture.topic)", "apns-push-type: alert"]
    /// nil: no body, GET (nghttp sends POST only with data).
    var body: String? = Fixture.payload
    var auth = Auth.valid
    var fault: SimulatorReason?
    var status: Int
    var reason: String?
    var testDescription: String { "\(name) → \(status) \(reason ?? "")" }
}

let reasonCases: [ReasonCase] = [
    ReasonCase(name: "valid alert", status: 200),
    ReasonCase(
        name: "voip payload of 5000 bytes", headers: ["apns-topic: \(Fixture.topic).voip", "apns-push-type: voip"],
        body: padded(5000), status: 200),
    ReasonCase(name: "GET", body: nil, status: 405, reason: "MethodNotAllowed"),
    ReasonCase(name: "path outside /3/device", path: "/3/devices/" + Fixture.device, status: 404, reason: "BadPath"),
    ReasonCase(name: "path /3/device/ without token", path: "/3/device/", status: 400, reason: "MissingDeviceToken"),
    ReasonCase(name: "token not hex", path: "/3/device/xyz0", status: 400, reason: "BadDeviceToken"),
    ReasonCase(name: "token of odd length", path: "/3/device/abc", status: 400, reason: "BadDeviceToken"),
    ReasonCase(name: "unknown token", path: "/3/device/0123456789", status: 400, reason: "BadDeviceToken"),
    ReasonCase(
        name: "token of another topic", path: "/3/device/" + Fixture.otherTopicDevice, status: 400,
        reason: "DeviceTokenNotForTopic"),
    ReasonCase(
        name: "unregistered token", path: "/3/device/" + Fixture.goneDevice, status: 410, reason: "Unregistered"),
    ReasonCase(
        name: "apns-id not a UUID", headers: ["apns-topic: \(Fixture.topic)", "apns-id: 1234"], status: 400,
        reason: "BadMessageId"),
    ReasonCase(
        name: "apns-id uppercase",
        headers: ["apns-topic: \(Fixture.topic)", "apns-id: EABEAE54-14A8-11E5-B60B-1697F925EC7B"],
        status: 400, reason: "BadMessageId"),
    ReasonCase(
        name: "apns-expiration not a number", headers: ["apns-topic: \(Fixture.topic)", "apns-expiration: tomorrow"],
        status: 400, reason: "BadExpirationDate"),
    ReasonCase(
        name: "apns-priority 7", headers: ["apns-topic: \(Fixture.topic)", "apns-priority: 7"], status: 400,
        reason: "BadPriority"),
    ReasonCase(
        name: "background with priority 10",
        headers: ["apns-topic: \(Fixture.topic)", "apns-push-type: background", "apns-priority: 10"], status: 400,
        reason: "BadPriority"),
    ReasonCase(name: "no apns-topic with a token", headers: [], status: 400, reason: "MissingTopic"),
    ReasonCase(name: "topic with a space", headers: ["apns-topic: com.example app"], status: 400, reason: "BadTopic"),
    ReasonCase(
        name: "voip push type without .voip suffix", headers: ["apns-topic: \(Fixture.topic)", "apns-push-type: voip"],
        status: 400, reason: "BadTopic"),
    ReasonCase(
        name: "alert push type on a .voip topic",
        headers: ["apns-topic: \(Fixture.topic).voip", "apns-push-type: alert"], status: 400, reason: "BadTopic"),
    ReasonCase(
        name: "unknown push type", headers: ["apns-topic: \(Fixture.topic)", "apns-push-type: shout"], status: 400,
        reason: "InvalidPushType"),
    ReasonCase(
        name: "accessory push to the .push-type.accessory topic",
        headers: ["apns-topic: \(Fixture.topic).push-type.accessory", "apns-push-type: accessory"], status: 200),
    ReasonCase(
        name: "accessory push type without the .push-type.accessory suffix",
        headers: ["apns-topic: \(Fixture.topic)", "apns-push-type: accessory"], status: 400, reason: "BadTopic"),
    ReasonCase(
        name: "topic not provisioned for the team", headers: ["apns-topic: com.other.team"], status: 400,
        reason: "TopicDisallowed"),
    ReasonCase(
        name: "collapse id of 65 bytes",
        headers: ["apns-topic: \(Fixture.topic)", "apns-collapse-id: " + String(repeating: "c", count: 65)],
        status: 400, reason: "BadCollapseId"),
    ReasonCase(
        name: "collapse id of 64 bytes",
        headers: ["apns-topic: \(Fixture.topic)", "apns-collapse-id: " + String(repeating: "c", count: 64)],
        status: 200),
    ReasonCase(
        name: "repeated apns-topic", headers: ["apns-topic: \(Fixture.topic)", "apns-topic: \(Fixture.topic)"],
        status: 400, reason: "DuplicateHeaders"),
    ReasonCase(name: "empty payload", body: "", status: 400, reason: "PayloadEmpty"),
    ReasonCase(name: "alert payload of 4097 bytes", body: padded(4097), status: 413, reason: "PayloadTooLarge"),
    ReasonCase(name: "alert payload of 4096 bytes", body: padded(4096), status: 200),
    ReasonCase(
        name: "voip payload of 5121 bytes", headers: ["apns-topic: \(Fixture.topic).voip", "apns-push-type: voip"],
        body: padded(5121), status: 413, reason: "PayloadTooLarge"),
    ReasonCase(name: "payload of 70000 bytes", body: padded(70000), status: 413, reason: "PayloadTooLarge"),
    ReasonCase(name: "payload not JSON", body: "{\"aps\": ", status: 400, reason: "BadPayload"),
    ReasonCase(name: "payload a JSON array", body: "[1,2]", status: 400, reason: "BadPayload"),
    ReasonCase(name: "no authorization", auth: .none, status: 403, reason: "MissingProviderToken"),
    ReasonCase(name: "token signed by another key", auth: .otherKey, status: 403, reason: "InvalidProviderToken"),
    ReasonCase(name: "token with unknown kid", auth: .unknownKeyID, status: 403, reason: "InvalidProviderToken"),
    ReasonCase(name: "authorization not a JWT", auth: .garbage, status: 403, reason: "InvalidProviderToken"),
    ReasonCase(
        name: "token issued 61 minutes ago", auth: .issuedAt(secondsAgo: 3660), status: 403,
        reason: "ExpiredProviderToken"),
    ReasonCase(name: "token issued 59 minutes ago", auth: .issuedAt(secondsAgo: 3540), status: 200),
    ReasonCase(name: "fault TooManyRequests", fault: .tooManyRequests, status: 429, reason: "TooManyRequests"),
    ReasonCase(
        name: "fault InternalServerError", fault: .internalServerError, status: 500, reason: "InternalServerError"),
    ReasonCase(name: "fault ServiceUnavailable", fault: .serviceUnavailable, status: 503, reason: "ServiceUnavailable"),
    ReasonCase(name: "fault Shutdown", fault: .shutdown, status: 503, reason: "Shutdown"),
    ReasonCase(name: "fault Forbidden", fault: .forbidden, status: 403, reason: "Forbidden"),
    ReasonCase(name: "fault IdleTimeout", fault: .idleTimeout, status: 400, reason: "IdleTimeout"),
]

/// A JSON object of exactly `size` bytes.
func padded(_ size: Int) -> String {
    let shell = #"{"aps":{"alert":""}}"#
    return #"{"aps":{"alert":""# + String(repeating: "x", count: size - shell.utf8.count) + #""}}"#
}

@Suite("Every reason, through nghttp")
struct NghttpReasonTests {
    @Test(
        "each request nghttp sends gets the status and reason Apple's tables give, an apns-id, and is counted once",
        arguments: reasonCases)
    func answers(_ c: ReasonCase) async throws {
        let key = TestSigningKey()
        try await withSimulator(key: key, { $0.tokenKeys = [key.trusted(topics: [Fixture.topic])] }) { simulator, dir in
            if let fault = c.fault { simulator.faults.script(deviceToken: Fixture.device, [fault]) }
            var args = ["-v", "--no-dep"]
            var headers = c.headers
            switch c.auth {
            case .valid: headers.append("authorization: " + key.authorization())
            case .none: break
            case .issuedAt(let ago):
                headers.append("authorization: " + key.authorization(iat: Date().timeIntervalSince1970 - ago))
            case .otherKey: headers.append("authorization: " + TestSigningKey().authorization())
            case .unknownKeyID:
                headers.append(
                    "authorization: " + key.authorization(iat: Date().timeIntervalSince1970, kid: "NOTAKEY123"))
            case .garbage: headers.append("authorization: bearer not.a.jwt")
            }
            for header in headers { args += ["-H", header] }
            if let body = c.body {
                let file = dir + "/body-\(UUID().uuidString).json"
                try body.write(toFile: file, atomically: true, encoding: .utf8)
                args += ["-d", file]
            }
            args.append("https://127.0.0.1:\(simulator.port)\(c.path)")
            let output = try await run("/usr/bin/nghttp", args)
            let answer = NghttpAnswer(output.stdout)
            #expect(answer.status == c.status, "\(output.stdout.suffix(800)) \(output.stderr)")
            #expect(answer.reason == c.reason)
            #expect(answer.apnsID != nil, "every answer carries apns-id")
            if c.reason == "Unregistered" { #expect(answer.timestamp == Int64(Fixture.goneSince * 1000)) }
            let counted =
                c.status == 200
                ? simulator.observation.count(status: 200)
                : simulator.observation.counters[ResponseKey(status: c.status, reason: c.reason)] ?? 0
            #expect(counted == 1)
        }
    }
}

/// What `nghttp -v` printed about the response.
struct NghttpAnswer {
    var status: Int?
    var reason: String?
    var apnsID: String?
    var timestamp: Int64?

    init(_ text: String) {
        status = Self.capture(#"recv \(stream_id=\d+\) :status: (\d+)"#, text).flatMap { Int($0) }
        reason = Self.capture(#"\{"reason":"([A-Za-z]+)""#, text)
        apnsID = Self.capture(#"recv \(stream_id=\d+\) apns-id: ([0-9A-Fa-f-]+)"#, text)
        timestamp = Self.capture(#""timestamp":(\d+)"#, text).flatMap { Int64($0) }
    }

    static func capture(_ pattern: String, _ text: String) -> String? {
        guard let regex = try? NSRegularExpression(pattern: pattern),
            let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
            let range = Range(match.range(at: 1), in: text)
        else { return nil }
        return String(text[range])
    }
}
