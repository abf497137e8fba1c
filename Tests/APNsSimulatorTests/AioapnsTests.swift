import APNsSimulator
import Foundation
import Testing

/// Python's aioapns (Debian python3-aioapns), a real APNs client, pointed at the simulator: its host and
/// port are class attributes, trust and ALPN come from the SSL context we hand it.
let aioapnsScript = #"""
    import asyncio, json, ssl, sys, time
    from collections import Counter
    from aioapns import APNs, NotificationRequest, PushType
    from aioapns.connection import APNsProductionClientProtocol

    port, ca, key, key_id, team, topic, device, count = sys.argv[1:9]
    APNsProductionClientProtocol.APNS_SERVER = "localhost"
    APNsProductionClientProtocol.APNS_PORT = int(port)

    async def main():
        ctx = ssl.create_default_context(cafile=ca)
        ctx.set_alpn_protocols(["h2"])
        client = APNs(key=key, key_id=key_id, team_id=team, topic=topic, ssl_context=ctx, max_connections=4)
        requests = [
            NotificationRequest(device_token=device, message={"aps": {"alert": "n%d" % i}}, push_type=PushType.ALERT)
            for i in range(int(count))
        ]
        start = time.monotonic()
        results = await asyncio.gather(*(client.send_notification(r) for r in requests))
        elapsed = time.monotonic() - start
        seen = Counter(r.status if r.is_successful else "%s %s" % (r.status, r.description) for r in results)
        ids_ok = all(r.notification_id == q.notification_id for r, q in zip(results, requests))
        print(json.dumps({"results": seen, "seconds": elapsed, "ids_ok": ids_ok}))
        client.pool.close()

    asyncio.run(main())
    """#

struct AioapnsRun: Decodable {
    var results: [String: Int]
    var seconds: Double
    var ids_ok: Bool
}

func runAioapns(_ simulator: Simulator, key: TestSigningKey, dir: String, count: Int) async throws -> AioapnsRun {
    let script = dir + "/send.py"
    try aioapnsScript.write(toFile: script, atomically: true, encoding: .utf8)
    let keyFile = dir + "/AuthKey.p8"
    try key.p8.write(toFile: keyFile, atomically: true, encoding: .utf8)
    let output = try await run(
        "/usr/bin/python3",
        [
            script, "\(simulator.port)", simulator.certificateAuthorityPath!, keyFile, key.keyID, key.teamID,
            Fixture.topic, Fixture.device, "\(count)",
        ], timeout: 120)
    let line = output.stdout.split(separator: "\n").last.map(String.init) ?? ""
    guard let run = try? JSONDecoder().decode(AioapnsRun.self, from: Data(line.utf8)) else {
        Issue.record("aioapns printed no result: \(output.stdout.suffix(500)) \(output.stderr.suffix(2000))")
        throw RawClientError.noResponse(0)
    }
    return run
}

/// aioapns signs a token for each connection it opens: with `max_connections=4`, four tokens of one key
/// within seconds, which the per-key token rule refuses from the third (docs/simulator.md). These tests
/// are about the rest of the protocol, so the rule is off here.
let aioapnsTokenRules: @Sendable (inout SimulatorConfiguration) -> Void = { $0.tokensPerKey = nil }

@Suite("aioapns against the simulator")
struct AioapnsTests {
    @Test("1,000 notifications from aioapns with token auth all get 200, each with its own apns-id")
    func thousandNotificationsWithTokenAuthAllSucceed() async throws {
        let key = TestSigningKey()
        try await withSimulator(key: key, aioapnsTokenRules) { simulator, dir in
            let result = try await runAioapns(simulator, key: key, dir: dir, count: 1000)
            #expect(result.results == ["200": 1000])
            #expect(result.ids_ok)
            #expect(simulator.observation.count(status: 200) == 1000)
            #expect(simulator.observation.records.count == 1000)
            #expect(Set(simulator.observation.records.map(\.apnsID)).count == 1000)
            print("aioapns: 1000 notifications in \(result.seconds) s (\(Int(1000 / result.seconds))/s)")
        }
    }

    @Test("with 429, 503 and 500 faults set, aioapns sees each reason at about its configured share")
    func withFaultsItSeesTheConfiguredReasons() async throws {
        let key = TestSigningKey()
        try await withSimulator(key: key, aioapnsTokenRules) { simulator, dir in
            simulator.faults.setRate(.tooManyRequests, 0.1)
            simulator.faults.setRate(.serviceUnavailable, 0.05)
            simulator.faults.setRate(.internalServerError, 0.05)
            let result = try await runAioapns(simulator, key: key, dir: dir, count: 1000)
            let tooMany = result.results["429 TooManyRequests"] ?? 0
            let unavailable = result.results["503 ServiceUnavailable"] ?? 0
            let internalError = result.results["500 InternalServerError"] ?? 0
            #expect(tooMany > 50 && tooMany < 160, "\(result.results)")
            #expect(unavailable > 15 && unavailable < 90, "\(result.results)")
            #expect(internalError > 15 && internalError < 90, "\(result.results)")
            #expect((result.results["200"] ?? 0) + tooMany + unavailable + internalError == 1000)
            #expect(simulator.observation.count(.tooManyRequests) == tooMany)
            #expect(simulator.observation.count(.serviceUnavailable) == unavailable)
        }
    }

    @Test("410 Unregistered for an unregistered device reaches aioapns")
    func unregisteredReasonReachesTheClient() async throws {
        let key = TestSigningKey()
        try await withSimulator(key: key, { $0.unregisteredDevices[Fixture.device] = 1_700_000_000 }) {
            simulator, dir in
            let result = try await runAioapns(simulator, key: key, dir: dir, count: 3)
            #expect(result.results == ["410 Unregistered": 3])
        }
    }
}
