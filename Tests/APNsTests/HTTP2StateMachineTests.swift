import NIOCore
import NIOEmbedded
import Testing

@testable import APNs

@Suite("HTTP/2 stream budget")
struct HTTP2StateMachineTests {
    private func makeMachine(maximum: Int, token: Bool) -> APNsHTTP2Handler.StateMachine {
        APNsHTTP2Handler.StateMachine(
            settings: APNsHTTP2Settings(
                maximumStreams: maximum, tokenAuthentication: token, pingInterval: .seconds(60),
                pingTimeout: .seconds(10), setupTimeout: .seconds(10)))
    }

    @Test("one stream before SETTINGS and, with token auth, until the first success; then the server's limit")
    func tokenAuthOneStreamUntilSuccess() {
        var machine = makeMachine(maximum: 500, token: true)
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
            var machine = makeMachine(maximum: 500, token: true)
            _ = machine.receivedSettings(maxConcurrentStreams: 1000)
            machine.streamOpened()
            #expect(machine.streamClosed(status: status) == 500, "\(status)")
        }
        for status in [403, 429, 500, 503] {
            var machine = makeMachine(maximum: 500, token: true)
            _ = machine.receivedSettings(maxConcurrentStreams: 1000)
            machine.streamOpened()
            #expect(machine.streamClosed(status: status) == nil, "\(status)")
        }
    }

    @Test("certificate auth uses the server's limit at once; a limit dropped mid-connection applies at once")
    func limitChangesMidConnection() {
        var machine = makeMachine(maximum: 1000, token: false)
        #expect(machine.receivedSettings(maxConcurrentStreams: 1000) == .becameReady(capacity: 1000))
        for _ in 0..<10 { machine.streamOpened() }
        #expect(machine.receivedSettings(maxConcurrentStreams: 1) == .capacityChanged(capacity: 1))
        #expect(!machine.canOpenStream)
        #expect(machine.receivedSettings(maxConcurrentStreams: 1) == .none)
        #expect(machine.receivedSettings(maxConcurrentStreams: 50) == .capacityChanged(capacity: 50))
    }

    @Test("MAX_CONCURRENT_STREAMS 0 pauses the connection without closing it")
    func zeroLimitPauses() {
        var machine = makeMachine(maximum: 10, token: false)
        _ = machine.receivedSettings(maxConcurrentStreams: 10)
        #expect(machine.receivedSettings(maxConcurrentStreams: 0) == .capacityChanged(capacity: 0))
        #expect(!machine.canOpenStream)
        #expect(!machine.isGoingAwayOrClosed)
        #expect(machine.receivedSettings(maxConcurrentStreams: 5) == .capacityChanged(capacity: 5))
    }

    @Test("GOAWAY stops new streams and drains")
    func goAway() {
        var machine = makeMachine(maximum: 10, token: false)
        _ = machine.receivedSettings(maxConcurrentStreams: 10)
        machine.streamOpened()
        #expect(machine.receivedGoAway(lastStreamID: 1) == .drain(lastStreamID: 1))
        #expect(machine.capacity == 0)
        #expect(!machine.isDrained)
        _ = machine.streamClosed(status: 200)
        #expect(machine.isDrained)
    }
}

@Suite("HTTP/2 connection timers")
struct HTTP2TimerTests {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    private func makeMachine() -> APNsHTTP2Handler.StateMachine {
        APNsHTTP2Handler.StateMachine(
            settings: APNsHTTP2Settings(
                maximumStreams: 100, tokenAuthentication: false, pingInterval: .seconds(60),
                pingTimeout: .seconds(10), setupTimeout: .seconds(5)),
            now: start)
    }

    @Test("the setup timeout is armed once when connected, stops at the first SETTINGS, and closes only before it")
    func setupTimeout() {
        var machine = makeMachine()
        #expect(machine.connected(now: start) == .schedule(.setup, at: start + .seconds(5)))
        #expect(machine.connected(now: start + .seconds(1)) == nil)
        #expect(machine.setupTimedOut()?.code == .connectFailed)
        #expect(machine.receivedSettings(maxConcurrentStreams: 100) == .becameReady(capacity: 100))
        #expect(machine.setupTimedOut() == nil)
    }

    @Test("a PING goes out only after a whole interval without reading, one at a time; its ACK stops its timeout")
    func pingWhenIdle() {
        var machine = makeMachine()
        #expect(machine.sessionStarted(now: start) == .schedule(.pingCheck, at: start + .seconds(60)))
        machine.received(now: start + .seconds(30))
        #expect(machine.pingCheckDue(now: start + .seconds(60)) == .checkAgain(at: start + .seconds(120)))
        #expect(machine.pingTimedOut() == nil)
        #expect(
            machine.pingCheckDue(now: start + .seconds(120))
                == .sendPing(timeoutAt: start + .seconds(130), nextCheckAt: start + .seconds(180)))
        #expect(machine.pingTimedOut()?.code == .pingTimeout)
        #expect(machine.pingCheckDue(now: start + .seconds(180)) == .checkAgain(at: start + .seconds(240)))
        #expect(machine.pingAcknowledged() == .cancel(.pingTimeout))
        #expect(machine.pingTimedOut() == nil)
        #expect(machine.pingAcknowledged() == nil)
    }

    @Test("the deadline timer is armed for the earliest deadline only, and re-armed for the earliest left")
    func deadlineTimer() {
        var machine = makeMachine()
        #expect(machine.requestQueued(deadline: start + .seconds(10)) == .schedule(.deadline, at: start + .seconds(10)))
        #expect(machine.requestQueued(deadline: start + .seconds(11)) == nil)
        #expect(machine.requestQueued(deadline: start + .seconds(5)) == .schedule(.deadline, at: start + .seconds(5)))
        #expect(
            machine.deadlinesExpired(earliestLeft: start + .seconds(10))
                == .schedule(.deadline, at: start + .seconds(10)))
        #expect(machine.deadlinesExpired(earliestLeft: nil) == nil)
        #expect(machine.requestQueued(deadline: start + .seconds(20)) == .schedule(.deadline, at: start + .seconds(20)))
    }

    @Test("once closed every timer is cancelled and none is armed again")
    func closedStopsTimers() {
        var machine = makeMachine()
        _ = machine.connected(now: start)
        _ = machine.sessionStarted(now: start)
        #expect(Set(machine.closed()) == Set(APNsHTTP2Handler.StateMachine.Timer.allCases))
        #expect(machine.pingCheckDue(now: start + .seconds(120)) == .none)
        #expect(machine.pingTimedOut() == nil)
        #expect(machine.setupTimedOut() == nil)
        #expect(machine.sessionStarted(now: start) == nil)
        #expect(machine.deadlinesExpired(earliestLeft: start + .seconds(1)) == nil)
        #expect(machine.capacity == 0)
    }
}

@Suite("HPACK header encoding per Apple")
struct HeaderEncoderTests {
    @Test(
        "authorization flagged never indexed; apns-id, expiration, collapse-id indexed once; :path and others unflagged"
    )
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
            content: .notification(notification), tokens: authenticator, deadline: .now(),
            completion: { _ in })
        let first = Dictionary(uniqueKeysWithValues: encoder.headers(for: request).map { ($0.name, $0.neverIndex) })
        let second = Dictionary(uniqueKeysWithValues: encoder.headers(for: request).map { ($0.name, $0.neverIndex) })
        // :path is left to nghttp2, which sends it as a literal without indexing (HPACKWireTests).
        #expect(first[":path"] == false && second[":path"] == false)
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
