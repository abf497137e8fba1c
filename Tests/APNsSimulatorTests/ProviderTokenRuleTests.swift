@testable import APNsSimulator
import Foundation
import Testing

/// The two provider-token rules on a manual time: per connection (a change less than the window after the
/// connection first used its token, then the connection unusable for a window) and per key over all
/// connections (at most K distinct tokens of one key first taken within a window).
@Suite("Provider token rules without a network")
struct ProviderTokenRuleTests {
    let key = TestSigningKey(keyID: "KEY1234567")
    let t0 = 1_800_000_000.0
    let minute = 60.0

    /// One connection's state machine on a shared ledger; `reason` is what a request with `authorization`
    /// gets at `now` (nil: authorized).
    struct Connection {
        var machine = ConnectionAuthStateMachine(mode: .token, tokenUpdateWindow: 20 * 60)
        let verifier: ProviderTokenVerifier
        let ledger: ProviderTokenLedger

        mutating func reason(_ authorization: String?, at now: Double) -> SimulatorReason? {
            if case .refuse(let reason) = machine.authorize(
                header: authorization, now: now, verifier: verifier, ledger: ledger)
            {
                return reason
            }
            return nil
        }
    }

    func ledger(limit: Int? = 2) -> ProviderTokenLedger {
        ProviderTokenLedger(limit: limit, window: 20 * 60, clock: ManualSimulatorClock(t0))
    }

    func connection(_ ledger: ProviderTokenLedger, keys: [ProviderTokenKey]? = nil) -> Connection {
        Connection(verifier: ProviderTokenVerifier(keys: keys ?? [key.trusted()]), ledger: ledger)
    }

    @Test("a change 19 minutes after first use is refused, and the connection refuses everything for 20 minutes")
    func changeAfterNineteenMinutes() {
        let ledger = ledger()
        var connection = connection(ledger)
        let a = key.authorization(iat: t0)
        let b = key.authorization(iat: t0 + 19 * minute)
        #expect(connection.reason(a, at: t0) == nil, "the first token is always taken")
        #expect(connection.reason(a, at: t0 + 19 * minute) == nil)
        #expect(connection.reason(b, at: t0 + 19 * minute) == .tooManyProviderTokenUpdates)
        let refusedAt = t0 + 19 * minute
        for (token, after) in [(a, 1.0), (b, 5 * minute), (nil, 10 * minute), (a, 20 * minute - 1)] {
            #expect(connection.reason(token, at: refusedAt + after) == .tooManyProviderTokenUpdates, "\(after) s after")
        }
        #expect(connection.reason(a, at: refusedAt + 20 * minute) == nil, "usable a window after the refusal")
        #expect(connection.reason(b, at: refusedAt + 20 * minute) == nil, "and a changes is allowed now")
        let usage = ledger.usage[key.keyID]!
        #expect(usage.tooEarlyUpdates == 1)
        #expect(usage.unusableConnectionRefusals == 4)
        #expect(usage.tooManyProviderTokenUpdates == 5)
        #expect(usage.distinctTokens == 2)
    }

    @Test("a change 20 minutes after first use is allowed; the next one again needs 20 minutes on the new token")
    func changeAfterTwentyMinutes() {
        var connection = connection(ledger(limit: nil))
        #expect(connection.reason(key.authorization(iat: t0), at: t0) == nil)
        #expect(connection.reason(key.authorization(iat: t0 + 20 * minute), at: t0 + 20 * minute) == nil)
        #expect(
            connection.reason(key.authorization(iat: t0 + 35 * minute), at: t0 + 35 * minute)
                == .tooManyProviderTokenUpdates)
    }

    @Test("the window counts from the connection's first use of its token, not from the token's iat (Pushy #931)")
    func windowCountsFromFirstUseNotFromIssue() {
        var connection = connection(ledger())
        let old = key.authorization(iat: t0 - 45 * minute)
        #expect(connection.reason(old, at: t0) == nil, "a token 45 minutes old, new to this connection")
        #expect(
            connection.reason(key.authorization(iat: t0 + 5 * minute), at: t0 + 5 * minute)
                == .tooManyProviderTokenUpdates,
            "replaced 5 minutes later: too soon for this connection, however old the token")
    }

    @Test("with the window 0 the per-connection rule is off")
    func connectionRuleOff() {
        var connection = connection(ledger(limit: nil))
        connection.machine = ConnectionAuthStateMachine(mode: .token, tokenUpdateWindow: 0)
        for i in 0..<5 {
            #expect(connection.reason(key.authorization(iat: t0 + Double(i)), at: t0 + Double(i)) == nil)
        }
    }

    @Test("a third distinct token of a key within 20 minutes is refused on any connection; another key's is not")
    func thirdTokenOfAKeyIsRefused() {
        let other = TestSigningKey(keyID: "KEY7654321")
        let keys = [key.trusted(), other.trusted()]
        let ledger = ledger()
        var pods = (0..<4).map { _ in connection(ledger, keys: keys) }
        let tokens = (0..<3).map { key.authorization(iat: t0 + Double($0) * minute) }
        #expect(pods[0].reason(tokens[0], at: t0) == nil)
        #expect(pods[1].reason(tokens[1], at: t0 + minute) == nil)
        #expect(pods[2].reason(tokens[2], at: t0 + 2 * minute) == .tooManyProviderTokenUpdates, "the third")
        #expect(pods[2].reason(tokens[2], at: t0 + 3 * minute) == .tooManyProviderTokenUpdates, "still over")
        #expect(pods[2].reason(tokens[0], at: t0 + 3 * minute) == nil, "a token already taken goes on anywhere")
        #expect(pods[3].reason(tokens[1], at: t0 + 3 * minute) == nil)
        #expect(pods[0].reason(tokens[0], at: t0 + 3 * minute) == nil, "the connections keep working")
        // Another key (a rotation's second key of the same team) counts apart.
        #expect(pods[3].reason(other.authorization(iat: t0), at: t0 + 3 * minute) != .tooManyProviderTokenUpdates)
        var fresh = (0..<2).map { _ in connection(ledger, keys: keys) }
        #expect(fresh[0].reason(other.authorization(iat: t0 + 4 * minute), at: t0 + 4 * minute) == nil)
        #expect(fresh[1].reason(other.authorization(iat: t0 + 5 * minute), at: t0 + 5 * minute) == nil)
        // 20 minutes after the first token was taken, it leaves the window: room for one more.
        var early = connection(ledger, keys: keys)
        #expect(early.reason(tokens[2], at: t0 + 20 * minute - 1) == .tooManyProviderTokenUpdates)
        var late = connection(ledger, keys: keys)
        #expect(late.reason(tokens[2], at: t0 + 20 * minute) == nil)

        let usage = ledger.usage
        #expect(usage[key.keyID]?.distinctTokens == 3)
        #expect(usage[key.keyID]?.mostInWindow == 3, "the refused third was presented within the window")
        #expect(usage[key.keyID]?.keyLimitRefusals == 3)
        #expect(usage[key.keyID]?.tooEarlyUpdates == 0)
        #expect(usage[other.keyID]?.distinctTokens == 2)
        #expect(usage[other.keyID]?.tooManyProviderTokenUpdates == 0)
    }

    @Test("a well-behaved fleet: one shared token per 30 minutes on 100 connections, never refused")
    func sharedTokenFleet() {
        let ledger = ledger()
        var pods = (0..<100).map { _ in connection(ledger) }
        var now = t0
        // Every pod reuses the token of the current 30-minute step; each connection keeps a token 20 minutes
        // or more before it changes (a pod's connection opened late keeps the old one a while).
        var used: [Int: (token: String, since: Double)] = [:]
        var signed: [Double: String] = [:]
        while now < t0 + 4 * 60 * minute {
            let step = (now / 1800).rounded(.down) * 1800
            // Signed once per step: every pod sends the same bytes (a signature is randomized).
            let token = signed[step] ?? key.authorization(iat: step)
            signed[step] = token
            for i in pods.indices where (i + Int(now)) % 7 == 0 {
                if let current = used[i], current.token != token, now - current.since < 20 * minute {
                    #expect(pods[i].reason(current.token, at: now) == nil)
                } else {
                    #expect(pods[i].reason(token, at: now) == nil)
                    if used[i]?.token != token { used[i] = (token, now) }
                }
            }
            now += minute
        }
        let usage = ledger.usage[key.keyID]!
        #expect(usage.tooManyProviderTokenUpdates == 0)
        #expect(usage.distinctTokens == 8)
        #expect(usage.mostInWindow == 1)
    }

    @Test("with K off the tokens are counted, never refused; reset() forgets the counts, not what was taken")
    func keyRuleOffStillCounts() {
        let ledger = ledger(limit: nil)
        for i in 0..<5 {
            var pod = connection(ledger)
            #expect(pod.reason(key.authorization(iat: t0 + Double(i)), at: t0 + Double(i)) == nil)
        }
        var usage = ledger.usage[key.keyID]!
        #expect(usage.distinctTokens == 5)
        #expect(usage.mostInWindow == 5)
        #expect(usage.inWindowNow == 5)
        #expect(usage.keyLimitRefusals == 0)
        ledger.resetCounts()
        usage = ledger.usage[key.keyID]!
        #expect(usage == ProviderTokenUsage())

        let limited = self.ledger(limit: 1)
        var first = connection(limited)
        let token = key.authorization(iat: t0)
        #expect(first.reason(token, at: t0) == nil)
        limited.resetCounts()
        var second = connection(limited)
        #expect(second.reason(token, at: t0 + minute) == nil, "still taken after a reset")
        #expect(second.reason(key.authorization(iat: t0 + minute), at: t0 + 25 * minute) == nil)
        #expect(limited.usage[key.keyID]?.distinctTokens == 2)
    }
}

@Suite("Provider token rules over connections")
struct ProviderTokenConnectionTests {
    @Test(
        "three connections, three tokens of one key within 20 minutes: the third gets 429 TooManyProviderTokenUpdates")
    func thirdTokenOverTheWire() async throws {
        let key = TestSigningKey()
        let clock = ManualSimulatorClock()
        try await withSimulator(key: key, { $0.clock = clock }) { simulator, _ in
            try await withClientGroup { group in
                var clients: [RawHTTP2Client] = []
                for _ in 0..<3 {
                    clients.append(
                        try await RawHTTP2Client.connect(
                            group: group, port: simulator.port, caPath: simulator.certificateAuthorityPath!))
                }
                let t0 = clock.now()
                var answers: [RawResponse] = []
                // Each token signed once and kept: a signature is randomized, so signing again is another token.
                let authorizations = (0..<3).map { key.authorization(iat: t0 + Double($0)) }
                for (i, client) in clients.enumerated() {
                    let authorization = authorizations[i]
                    client.send(stream: 1, headers: RawHTTP2Client.apnsHeaders(authorization: authorization))
                    answers.append(try await client.response(stream: 1))
                    clock.advance(by: 60)
                }
                #expect(answers.map(\.status) == [200, 200, 429])
                #expect(answers[2].reason == "TooManyProviderTokenUpdates")
                clients[2].send(stream: 3, headers: RawHTTP2Client.apnsHeaders(authorization: key.authorization()))
                #expect(
                    try await clients[2].response(stream: 3).status == 429,
                    "TestSigningKey's reused token is a fourth, also over")
                clients[2].send(
                    stream: 5, headers: RawHTTP2Client.apnsHeaders(authorization: authorizations[0]))
                #expect(try await clients[2].response(stream: 5).status == 200, "the first connection's token")
                let usage = simulator.observation.providerTokens(keyID: key.keyID)
                #expect(usage.distinctTokens == 4)
                #expect(usage.mostInWindow == 4)
                #expect(usage.keyLimitRefusals == 2)
                #expect(usage.tooManyProviderTokenUpdates == 2)
                #expect(simulator.observation.count(.tooManyProviderTokenUpdates) == 2)
                #expect(
                    simulator.observation.summary().contains(
                        "tokens \(key.keyID) 4 distinct 4 most-in-window 2 refused"))
                for client in clients { await client.close() }
            }
        }
    }
}
