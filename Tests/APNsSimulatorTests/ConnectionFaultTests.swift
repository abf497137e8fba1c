import APNsSimulator
import Foundation
import NIOHTTP2
import Testing

@Suite("Connection faults and run-time control")
struct ConnectionFaultTests {
    let key = TestSigningKey()

    func push(_ client: RawHTTP2Client, _ stream: Int, token: String = Fixture.device) {
        client.send(
            stream: stream, headers: RawHTTP2Client.apnsHeaders(token: token, authorization: key.authorization()))
    }

    @Test("GOAWAY after N requests carries NO_ERROR, the Shutdown reason and the last stream ID, then closes")
    func goAwayAfterNRequestsCarriesReasonAndLastStreamID() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            var faults = FaultInjector.ConnectionFaults()
            faults.goAwayAfter = 2
            simulator.faults.connection = faults
            push(client, 1)
            #expect(try await client.response(stream: 1).status == 200)
            push(client, 3)
            #expect(try await client.response(stream: 3).status == 200)
            #expect(try await eventually { client.goAway != nil })
            let goAway = try #require(client.goAway)
            #expect(goAway.lastStreamID == HTTP2StreamID(3))
            #expect(goAway.code == .noError)
            #expect(goAway.reason == #"{"reason":"Shutdown"}"#)
            #expect(try await eventually { client.isClosed })
            #expect(simulator.observation.goAways == 1)
        }
    }

    @Test("GOAWAY on demand still answers the streams up to its last stream ID, then closes")
    func goAwayOnDemandAnswersStreamsUpToLastStreamID() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1)
            #expect(try await client.response(stream: 1).status == 200)
            simulator.faults.latency = .fixed(.seconds(3))
            push(client, 3)
            #expect(try await eventually { simulator.observation.liveStreams == 1 })
            simulator.goAway(reason: .serviceUnavailable)
            #expect(try await eventually { client.goAway != nil })
            #expect(client.goAway?.lastStreamID == HTTP2StreamID(3))
            #expect(client.goAway?.reason == #"{"reason":"ServiceUnavailable"}"#)
            #expect(
                try await client.response(stream: 3).status == 200, "a stream below last-stream-id is still answered")
            #expect(try await eventually { client.isClosed })
        }
    }

    @Test("an abrupt close sends no GOAWAY and leaves the request in flight unanswered")
    func abruptCloseAnswersNothing() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            var faults = FaultInjector.ConnectionFaults()
            faults.closeAfter = 2
            simulator.faults.connection = faults
            push(client, 1)
            #expect(try await client.response(stream: 1).status == 200)
            push(client, 3)
            #expect(try await eventually { client.isClosed })
            #expect(client.goAway == nil)
            #expect(RawResponse(frames: client.received.filter { $0.streamID == HTTP2StreamID(3) }) == nil)
        }
    }

    @Test("closing all connections on demand closes the client's and leaves none live")
    func closeAllConnectionsOnDemand() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1)
            #expect(try await client.response(stream: 1).status == 200)
            #expect(simulator.observation.liveConnections == 1)
            simulator.closeAllConnections()
            #expect(try await eventually { client.isClosed })
            #expect(try await eventually { simulator.observation.liveConnections == 0 })
        }
    }

    @Test("an idle connection gets GOAWAY IdleTimeout with last stream ID 0, then closes")
    func idleConnectionGetsGoAwayIdleTimeout() async throws {
        try await withRawConnection(key: key, { $0.idleTimeout = .milliseconds(300) }) {
            (_: Simulator, client: RawHTTP2Client) async throws in
            #expect(try await eventually { client.goAway != nil })
            #expect(client.goAway?.reason == #"{"reason":"IdleTimeout"}"#)
            #expect(client.goAway?.lastStreamID == HTTP2StreamID(0))
            #expect(try await eventually { client.isClosed })
        }
    }

    @Test("a stream limit changed at run time reaches a connection already open")
    func maxConcurrentStreamsChangesMidConnection() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1)
            #expect(try await client.response(stream: 1).status == 200)
            #expect(try await eventually { client.maxConcurrentStreams == 1000 })
            simulator.setMaxConcurrentStreams(7)
            #expect(try await eventually { client.maxConcurrentStreams == 7 })
        }
    }

    @Test("the stream limit drops to 1 after a rejection and comes back to 1000 after a success")
    func streamsDropToOneAfterARejectionAndComeBackAfterASuccess() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            var faults = FaultInjector.ConnectionFaults()
            faults.dropStreamsAfterRejection = 1
            simulator.faults.connection = faults
            push(client, 1)
            #expect(try await client.response(stream: 1).status == 200)
            #expect(try await eventually { client.maxConcurrentStreams == 1000 })
            push(client, 3, token: "ffff")
            #expect(try await client.response(stream: 3).reason == "BadDeviceToken")
            #expect(try await eventually { client.maxConcurrentStreams == 1 })
            push(client, 5)
            #expect(try await client.response(stream: 5).status == 200)
            #expect(try await eventually { client.maxConcurrentStreams == 1000 })
        }
    }

    @Test("configured latency delays the answer by at least its lower bound")
    func latencyDelaysTheAnswer() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1)
            _ = try await client.response(stream: 1)
            simulator.faults.latency = .uniform(.milliseconds(200), .milliseconds(250))
            let start = ContinuousClock.now
            push(client, 3)
            #expect(try await client.response(stream: 3).status == 200)
            #expect(ContinuousClock.now - start >= .milliseconds(200))
        }
    }

    @Test("429 and 500 faults follow their configured share of 400 requests; once cleared, requests succeed")
    func rateFaultsFollowTheConfiguredShare() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            simulator.faults.setRate(.tooManyRequests, 0.3)
            simulator.faults.setRate(.internalServerError, 0.1)
            for i in 0..<400 { push(client, 1 + 2 * i) }
            #expect(try await eventually(timeout: 20) { simulator.observation.counters.values.reduce(0, +) == 400 })
            let tooMany = simulator.observation.count(.tooManyRequests)
            let serverErrors = simulator.observation.count(.internalServerError)
            #expect((80...160).contains(tooMany), "\(tooMany)")
            #expect((20...70).contains(serverErrors), "\(serverErrors)")
            #expect(simulator.observation.count(status: 200) == 400 - tooMany - serverErrors)
            simulator.faults.clear()
            push(client, 801)
            #expect(try await client.response(stream: 801).status == 200)
        }
    }

    @Test("accepted notifications are recorded with headers and payload, keeping only the latest recordLimit")
    func acceptedNotificationsAreRecordedWithinTheLimit() async throws {
        try await withRawConnection(key: key, { $0.recordLimit = 3 }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            for i in 0..<5 {
                client.send(
                    stream: 1 + 2 * i,
                    headers: RawHTTP2Client.apnsHeaders(
                        authorization: key.authorization(),
                        extra: [("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7\(i)")]),
                    body: #"{"aps":{"alert":"n\#(i)"}}"#)
                _ = try await client.response(stream: 1 + 2 * i)
            }
            #expect(try await eventually { simulator.observation.count(status: 200) == 5 })
            let records = simulator.observation.records
            #expect(records.count == 3)
            #expect(simulator.observation.droppedRecords == 2)
            #expect(records.map(\.apnsID) == (2..<5).map { "eabeae54-14a8-11e5-b60b-1697f925ec7\($0)" })
            let last = try #require(records.last)
            #expect(last.deviceToken == Fixture.device)
            #expect(last.topic == Fixture.topic)
            #expect(last.pushType == "alert")
            #expect(String(decoding: last.payload, as: UTF8.self) == #"{"aps":{"alert":"n4"}}"#)
            #expect(last.headers.contains { $0.name == "apns-topic" && $0.value == Fixture.topic })
            #expect(records.allSatisfy { $0.connectionID == records[0].connectionID })
            simulator.observation.recordLimit = 0
            push(client, 11)
            #expect(try await client.response(stream: 11).status == 200)
            #expect(simulator.observation.records.isEmpty)
        }
    }

    @Test("the development environment adds apns-unique-id; production does not")
    func developmentAddsUniqueID() async throws {
        try await withRawConnection(key: key, { $0.environment = .development }) {
            (_: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1)
            let answer = try await client.response(stream: 1)
            #expect(answer.status == 200)
            #expect(answer.headers.first(name: "apns-unique-id")?.count == 36)
        }
        try await withRawConnection(key: key, { _ in }) { (_: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1)
            #expect(try await client.response(stream: 1).headers.first(name: "apns-unique-id") == nil)
        }
    }

    @Test("apns-id is echoed when sent, or made up as a lowercase version-4 UUID")
    func apnsIDIsEchoedOrMadeUp() async throws {
        try await withRawConnection(key: key, { _ in }) { (_: Simulator, client: RawHTTP2Client) async throws in
            let id = "eabeae54-14a8-11e5-b60b-1697f925ec7b"
            client.send(
                stream: 1,
                headers: RawHTTP2Client.apnsHeaders(authorization: key.authorization(), extra: [("apns-id", id)]))
            #expect(try await client.response(stream: 1).headers.first(name: "apns-id") == id)
            push(client, 3)
            let made = try #require(try await client.response(stream: 3).headers.first(name: "apns-id"))
            #expect(
                made.range(
                    of: #"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"#,
                    options: .regularExpression) != nil)
        }
    }

    @Test("unknown devices can be accepted, and devices unregistered, registered and removed at run time")
    func unknownDevicesCanBeAcceptedAndRegistryChangesAtRunTime() async throws {
        try await withRawConnection(key: key, { _ in }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1, token: "abcd")
            #expect(try await client.response(stream: 1).reason == "BadDeviceToken")
            simulator.devices.policy = .accept
            push(client, 3, token: "abcd")
            #expect(try await client.response(stream: 3).status == 200)
            simulator.devices.unregister("abcd", at: 1_600_000_000)
            push(client, 5, token: "abcd")
            let gone = try await client.response(stream: 5)
            #expect(gone.status == 410)
            #expect(gone.body == #"{"reason":"Unregistered","timestamp":1600000000000}"#)
            simulator.devices.register("ABCD", topic: Fixture.topic, environment: .development)
            push(client, 7, token: "abcd")
            #expect(try await client.response(stream: 7).reason == "BadDeviceToken", "token of the other environment")
            simulator.devices.remove("abcd")
            push(client, 9, token: "abcd")
            #expect(try await client.response(stream: 9).status == 200, "unknown again, and unknown ones are accepted")
        }
    }
}
