import APNsSimulator
import Foundation
import NIOCore
import NIOHTTP2
import NIOPosix
import Testing

/// Runs `body` with an event loop group that is shut down afterwards.
func withClientGroup<T>(_ body: (MultiThreadedEventLoopGroup) async throws -> T) async throws -> T {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    do {
        let result = try await body(group)
        try await group.shutdownGracefully()
        return result
    } catch {
        try? await group.shutdownGracefully()
        throw error
    }
}

/// Simulator + one raw client connection, both cleaned up.
func withRawConnection(
    key: TestSigningKey = TestSigningKey(),
    _ adjust: (inout SimulatorConfiguration) throws -> Void = { _ in },
    _ body: (Simulator, RawHTTP2Client) async throws -> Void
) async throws {
    try await withSimulator(key: key, adjust) { simulator, _ in
        try await withClientGroup { group in
            let client = try await RawHTTP2Client.connect(
                group: group, port: simulator.port, caPath: simulator.certificateAuthorityPath!)
            do {
                try await body(simulator, client)
            } catch {
                await client.close()
                throw error
            }
            await client.close()
        }
    }
}

@Suite("Malformed requests, through a raw HTTP/2 client")
struct MalformedRequestTests {
    static let cases: [(String, [(String, String)], Int, String)] = [
        (
            "duplicate :path",
            [(":method", "POST"), (":path", "/3/device/" + Fixture.device), (":path", "/3/device/" + Fixture.device)],
            400, "DuplicateHeaders"
        ),
        (
            "duplicate apns-id",
            [
                (":method", "POST"), (":path", "/3/device/" + Fixture.device),
                ("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7b"),
                ("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7b"),
            ], 400, "DuplicateHeaders"
        ),
        ("method PUT", [(":method", "PUT"), (":path", "/3/device/" + Fixture.device)], 405, "MethodNotAllowed"),
        ("no :method", [(":path", "/3/device/" + Fixture.device)], 405, "MethodNotAllowed"),
        ("no :path", [(":method", "POST")], 404, "BadPath"),
        ("path /", [(":method", "POST"), (":path", "/")], 404, "BadPath"),
        ("path /3/device", [(":method", "POST"), (":path", "/3/device")], 400, "MissingDeviceToken"),
        ("path /3/device/", [(":method", "POST"), (":path", "/3/device/")], 400, "MissingDeviceToken"),
        ("token with a slash", [(":method", "POST"), (":path", "/3/device/aa/bb")], 404, "BadPath"),
    ]

    @Test(
        "a malformed request (duplicate headers, bad method or path) gets its status and JSON reason, and an apns-id",
        arguments: cases.indices)
    func answers(_ index: Int) async throws {
        let (name, headers, status, reason) = Self.cases[index]
        let key = TestSigningKey()
        try await withRawConnection(key: key) { (_: Simulator, client: RawHTTP2Client) async throws in
            client.send(
                stream: 1,
                headers: headers + [
                    (":scheme", "https"), ("apns-topic", Fixture.topic), ("authorization", key.authorization()),
                ])
            let answer = try await client.response(stream: 1)
            #expect(answer.status == status, "\(name)")
            #expect(answer.reason == reason, "\(name)")
            #expect(answer.headers.first(name: "content-type") == "application/json")
            #expect(answer.headers.first(name: "apns-id")?.count == 36)
        }
    }

    /// ALPN offers only h2: a client offering h2 gets it; one offering only http/1.1 gets no protocol,
    /// and its HTTP/1.1 request is refused (connection closed without an HTTP/1.1 answer).
    @Test("ALPN offers only h2, and an HTTP/1.1 request is refused without an answer")
    func alpnIsH2Only() async throws {
        try await withSimulator { simulator, dir in
            let script = """
                import socket, ssl, sys
                def connect(protocols):
                    ctx = ssl.create_default_context(cafile=sys.argv[1])
                    ctx.set_alpn_protocols(protocols)
                    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[2]))), server_hostname="localhost")
                s = connect(["h2", "http/1.1"])
                print("offered h2+http/1.1 ->", s.selected_alpn_protocol())
                s.close()
                s = connect(["http/1.1"])
                print("offered http/1.1 ->", s.selected_alpn_protocol())
                s.sendall(b"POST /3/device/00 HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
                s.settimeout(5)
                data = b""
                try:
                    while True:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                except Exception as e:
                    pass
                print("http/1.1 answer:", b"HTTP/1.1" in data)
                """
            let file = dir + "/alpn.py"
            try script.write(toFile: file, atomically: true, encoding: .utf8)
            let output = try await run(
                "/usr/bin/python3", [file, simulator.certificateAuthorityPath!, "\(simulator.port)"])
            #expect(output.stdout.contains("offered h2+http/1.1 -> h2"), "\(output.stdout) \(output.stderr)")
            #expect(output.stdout.contains("offered http/1.1 -> None"))
            #expect(output.stdout.contains("http/1.1 answer: False"))
            #expect(simulator.observation.counters.isEmpty)
        }
    }
}

@Suite("Provider token rules on one connection")
struct TokenConnectionTests {
    @Test("one stream until the first valid provider token, then the configured limit")
    func oneStreamUntilTheFirstValidTokenThenTheConfiguredLimit() async throws {
        let key = TestSigningKey()
        try await withRawConnection(key: key, { $0.maxConcurrentStreams = 321 }) {
            (_: Simulator, client: RawHTTP2Client) async throws in
            client.send(stream: 1, headers: RawHTTP2Client.apnsHeaders(authorization: nil))
            #expect(try await client.response(stream: 1).reason == "MissingProviderToken")
            #expect(client.maxConcurrentStreams == 1)
            client.send(stream: 3, headers: RawHTTP2Client.apnsHeaders(authorization: key.authorization()))
            #expect(try await client.response(stream: 3).status == 200)
            #expect(try await eventually { client.maxConcurrentStreams == 321 })
        }
    }

    @Test(
        "a token change 19 minutes after the connection first used its token is 429 TooManyProviderTokenUpdates, and the connection refuses every request for 20 minutes"
    )
    func tokenChangeTooSoonMakesTheConnectionUnusable() async throws {
        let key = TestSigningKey()
        let clock = ManualSimulatorClock()
        try await withRawConnection(key: key, { $0.clock = clock }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            var stream = -1
            func push(_ authorization: String?) async throws -> RawResponse {
                stream += 2
                client.send(stream: stream, headers: RawHTTP2Client.apnsHeaders(authorization: authorization))
                return try await client.response(stream: stream)
            }
            let t0 = clock.now()
            let first = key.authorization(iat: t0)
            let second = key.authorization(iat: t0 + 19 * 60)
            #expect(try await push(first).status == 200)
            clock.advance(by: 19 * 60)
            let refused = try await push(second)
            #expect(refused.status == 429)
            #expect(refused.reason == "TooManyProviderTokenUpdates")
            clock.advance(by: 60)
            for authorization in [first, second, nil] {
                let answer = try await push(authorization)
                #expect(answer.status == 429, "unusable: every request is refused, the old token's too")
                #expect(answer.reason == "TooManyProviderTokenUpdates")
            }
            clock.advance(by: 19 * 60 - 1)
            #expect(try await push(first).status == 429, "a second before the window since the refusal ends")
            clock.advance(by: 1)
            #expect(try await push(first).status == 200, "usable again 20 minutes after the refusal")
            #expect(try await push(second).status == 200, "and the change is allowed: the token is 39 minutes in use")
            #expect(simulator.observation.count(.tooManyProviderTokenUpdates) == 5)
            let usage = simulator.observation.providerTokens(keyID: key.keyID)
            #expect(usage.tooEarlyUpdates == 1)
            #expect(usage.unusableConnectionRefusals == 4)
            #expect(usage.keyLimitRefusals == 0)
            #expect(usage.distinctTokens == 2)
        }
    }

    @Test("with both token rules off, the token may change on every request")
    func tokenRulesCanBeSwitchedOff() async throws {
        let key = TestSigningKey()
        try await withRawConnection(
            key: key,
            {
                $0.tokenUpdateWindow = 0
                $0.tokensPerKey = nil
            }
        ) {
            (_: Simulator, client: RawHTTP2Client) async throws in
            for (i, age) in [0.0, 1, 2, 3].enumerated() {
                let stream = 1 + 2 * i
                client.send(
                    stream: stream,
                    headers: RawHTTP2Client.apnsHeaders(
                        authorization: key.authorization(iat: Date().timeIntervalSince1970 - age)))
                #expect(try await client.response(stream: stream).status == 200)
            }
        }
    }

    @Test("a cached provider token expires after an hour: 403 ExpiredProviderToken")
    func cachedTokenExpiresAfterAnHour() async throws {
        let key = TestSigningKey()
        let clock = ManualSimulatorClock()
        try await withRawConnection(key: key, { $0.clock = clock }) {
            (_: Simulator, client: RawHTTP2Client) async throws in
            let token = key.authorization(iat: clock.now())
            client.send(stream: 1, headers: RawHTTP2Client.apnsHeaders(authorization: token))
            #expect(try await client.response(stream: 1).status == 200)
            clock.advance(by: 3601)
            client.send(stream: 3, headers: RawHTTP2Client.apnsHeaders(authorization: token))
            let answer = try await client.response(stream: 3)
            #expect(answer.status == 403)
            #expect(answer.reason == "ExpiredProviderToken")
        }
    }

    // APNs checks the provider token before the device token (a bad key with a non-hex token is
    // answered 403 InvalidProviderToken, as client libraries report): the simulator answered a
    // malformed token 400 BadDeviceToken first, so a credential probe passed against it with any key.
    @Test("the credential is checked before the device token's form; an all-zero token is never delivered")
    func credentialBeforeDeviceToken() async throws {
        let key = TestSigningKey()
        let stranger = TestSigningKey(keyID: "UNKNOWNKEY")
        let zeros = String(repeating: "0", count: 64)
        try await withRawConnection(key: key, { $0.tokenUpdateWindow = 0 }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            // Made-up tokens of APNs' length pass, as in `dev`; the all-zero one still does not.
            simulator.devices.policy = .acceptLength(bytes: 32)
            let cases: [(String, String, Int, String?)] = [
                ("zz11", stranger.authorization(), 403, "InvalidProviderToken"),
                ("abc", stranger.authorization(), 403, "InvalidProviderToken"),
                (zeros, stranger.authorization(), 403, "InvalidProviderToken"),
            ]
            var stream = 1
            for (token, authorization, status, reason) in cases {
                client.send(
                    stream: stream, headers: RawHTTP2Client.apnsHeaders(token: token, authorization: authorization))
                let answer = try await client.response(stream: stream)
                #expect(
                    answer.status == status && answer.reason == reason,
                    "\(token): \(answer.status) \(answer.reason ?? "")")
                stream += 2
            }
        }
        try await withRawConnection(key: key) { (simulator: Simulator, client: RawHTTP2Client) async throws in
            simulator.devices.policy = .acceptLength(bytes: 32)
            let cases: [(String, Int, String?)] = [
                ("zz11", 400, "BadDeviceToken"), ("abc", 400, "BadDeviceToken"), (zeros, 400, "BadDeviceToken"),
                (String(repeating: "a1", count: 32), 200, nil),
            ]
            var stream = 1
            for (token, status, reason) in cases {
                client.send(
                    stream: stream,
                    headers: RawHTTP2Client.apnsHeaders(token: token, authorization: key.authorization()))
                let answer = try await client.response(stream: stream)
                #expect(
                    answer.status == status && answer.reason == reason,
                    "\(token): \(answer.status) \(answer.reason ?? "")")
                stream += 2
            }
        }
    }

    @Test("one team per connection: another team's token is 403 InvalidProviderToken")
    func oneTeamPerConnection() async throws {
        let key = TestSigningKey()
        let other = TestSigningKey(teamID: "OTHERTEAM1", keyID: "OTHERKEY12")
        try await withRawConnection(
            key: key,
            {
                $0.tokenKeys.append(other.trusted()); $0.tokenUpdateWindow = 0
            }
        ) { (_: Simulator, client: RawHTTP2Client) async throws in
            client.send(stream: 1, headers: RawHTTP2Client.apnsHeaders(authorization: key.authorization()))
            #expect(try await client.response(stream: 1).status == 200)
            client.send(stream: 3, headers: RawHTTP2Client.apnsHeaders(authorization: other.authorization()))
            let answer = try await client.response(stream: 3)
            #expect(answer.status == 403)
            #expect(answer.reason == "InvalidProviderToken")
        }
    }
}
