import NIOCore
import NIOEmbedded
import Testing

@testable import APNs

@Suite("HTTP/2 stream budget")
struct HTTP2StateMachineTests {
    @Test("one stream before SETTINGS and, with token auth, until the first success; then the server's limit")
    func tokenAuthOneStreamUntilSuccess() {
        var machine = APNsHTTP2StateMachine(configuredMaximum: 500, tokenAuthentication: true)
        #expect(machine.capacity == 1)
        #expect(machine.receivedSettings(maxConcurrentStreams: 1000) == .becameReady(capacity: 1))
        machine.streamOpened()
        #expect(!machine.canOpenStream)
        #expect(machine.streamClosed(status: 403) == nil)
        #expect(machine.capacity == 1)
        machine.streamOpened()
        #expect(machine.streamClosed(status: 200) == 500)
        #expect(machine.capacity == 500)
    }

    // The one-stream start lifted only on a 200: a batch of stale tokens (410s) or bad ones (400s)
    // kept a fresh connection at one stream although every answer proved the provider token.
    @Test("with token auth, a 400 or 410 proves the token as a 200 does; 403, 429 and 5xx do not")
    func anyAnswerButRefusalProvesTheToken() {
        for status in [400, 404, 410, 413] {
            var machine = APNsHTTP2StateMachine(configuredMaximum: 500, tokenAuthentication: true)
            _ = machine.receivedSettings(maxConcurrentStreams: 1000)
            machine.streamOpened()
            #expect(machine.streamClosed(status: status) == 500, "\(status)")
        }
        for status in [403, 429, 500, 503] {
            var machine = APNsHTTP2StateMachine(configuredMaximum: 500, tokenAuthentication: true)
            _ = machine.receivedSettings(maxConcurrentStreams: 1000)
            machine.streamOpened()
            #expect(machine.streamClosed(status: status) == nil, "\(status)")
        }
    }

    @Test("certificate auth uses the server's limit at once; a limit dropped mid-connection applies at once")
    func limitChangesMidConnection() {
        var machine = APNsHTTP2StateMachine(configuredMaximum: 1000, tokenAuthentication: false)
        #expect(machine.receivedSettings(maxConcurrentStreams: 1000) == .becameReady(capacity: 1000))
        for _ in 0..<10 { machine.streamOpened() }
        #expect(machine.receivedSettings(maxConcurrentStreams: 1) == .capacityChanged(capacity: 1))
        #expect(!machine.canOpenStream)
        #expect(machine.receivedSettings(maxConcurrentStreams: 1) == .none)
        #expect(machine.receivedSettings(maxConcurrentStreams: 50) == .capacityChanged(capacity: 50))
    }

    @Test("MAX_CONCURRENT_STREAMS 0 pauses the connection without closing it")
    func zeroLimitPauses() {
        var machine = APNsHTTP2StateMachine(configuredMaximum: 10, tokenAuthentication: false)
        _ = machine.receivedSettings(maxConcurrentStreams: 10)
        #expect(machine.receivedSettings(maxConcurrentStreams: 0) == .capacityChanged(capacity: 0))
        #expect(!machine.canOpenStream)
        #expect(!machine.isGoingAwayOrClosed)
        #expect(machine.receivedSettings(maxConcurrentStreams: 5) == .capacityChanged(capacity: 5))
    }

    @Test("GOAWAY stops new streams and drains")
    func goAway() {
        var machine = APNsHTTP2StateMachine(configuredMaximum: 10, tokenAuthentication: false)
        _ = machine.receivedSettings(maxConcurrentStreams: 10)
        machine.streamOpened()
        #expect(machine.receivedGoAway(lastStreamID: 1) == .drain(lastStreamID: 1))
        #expect(machine.capacity == 0)
        #expect(!machine.isDrained)
        _ = machine.streamClosed(status: 200)
        #expect(machine.isDrained)
    }
}

@Suite("HPACK header encoding per Apple")
struct HeaderEncoderTests {
    @Test(":path and authorization never indexed; apns-id, expiration, collapse-id indexed once; others indexed")
    func flags() throws {
        var encoder = APNsHeaderEncoder(authority: "api.push.apple.com")
        let pki = try TestPKI()
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: APNsSigningKey(file: pki.tokenKey))
        let notification = APNsNotification(
            deviceToken: try APNsDeviceToken("abcd"), topic: "com.example.app", pushType: .alert, priority: .immediate,
            expiration: .at(secondsSince1970: 1_800_000_000), collapseID: "c", apnsID: .random(),
            payload: Array("{}".utf8))
        let request = APNsHTTP2Request(
            content: .notification(notification), token: try authenticator.currentToken(), deadline: .now(),
            completion: { _ in })
        let first = Dictionary(uniqueKeysWithValues: encoder.headers(for: request).map { ($0.name, $0.neverIndex) })
        let second = Dictionary(uniqueKeysWithValues: encoder.headers(for: request).map { ($0.name, $0.neverIndex) })
        #expect(first[":path"] == true && second[":path"] == true)
        #expect(first["authorization"] == true && second["authorization"] == true)
        for name in ["apns-id", "apns-expiration", "apns-collapse-id"] {
            #expect(first[name] == false, "\(name) indexed the first time")
            #expect(second[name] == true, "\(name) not indexed afterwards")
        }
        for name in [":method", ":scheme", ":authority", "apns-topic", "apns-push-type", "apns-priority"] {
            #expect(first[name] == false && second[name] == false)
        }
        let values = Dictionary(uniqueKeysWithValues: encoder.headers(for: request).map { ($0.name, $0.value) })
        #expect(values[":method"] == "POST")
        #expect(values[":path"] == "/3/device/abcd")
        #expect(values[":authority"] == "api.push.apple.com")
        #expect(values["apns-topic"] == "com.example.app")
        #expect(values["apns-push-type"] == "alert")
        #expect(values["apns-priority"] == "10")
        #expect(values["apns-expiration"] == "1800000000")
        #expect(values["apns-collapse-id"] == "c")
        #expect(values["apns-id"] == notification.apnsID?.uuidString)
        #expect(values["authorization"]?.hasPrefix("bearer ") == true)
    }
}
