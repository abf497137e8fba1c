import Foundation
import Testing
import Threading

@testable import APNs

/// The wall clock stepped under running connections (NTP correcting it, a VM resumed): connections
/// keep their tokens by the monotonic clock, so a step never makes one change its token too soon
/// (APNs: 429 TooManyProviderTokenUpdates, the connection unusable), and the step is counted once.
@Suite("Provider tokens: a wall clock that jumps")
struct TokenClockJumpTests {
    static let start: Int64 = 1_800_000_000 / 1800 * 1800

    /// Connections opened at every minute of a period; the pod's wall clock is `before` seconds off
    /// APNs's ("real") time, and at `jumpAfter` minutes into the run steps to `after` seconds off.
    /// Returns, for each connection, every token it used with the monotonic seconds it first used it
    /// and its real age then, plus the jumps the authenticator reported.
    private func run(before: Int64 = 0, after: Int64, jumpAfter: Int64 = 45) throws -> (
        uses: [[(issuedAt: Int64, since: Int64, realAge: Int64)]], jumps: [Int64], counted: Int
    ) {
        let pki = try TestPKI()
        let wall = SettableWallClock(Double(Self.start + before))
        let mono = SettableWallClock(0)
        let reported = Locked<[Int64]>([])
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: try APNsSigningKey(file: pki.tokenKey),
            wallClock: { wall.now }, monotonic: { Int64(mono.now) },
            onClockJump: { jump in reported.withLock { $0.append(jump) } })
        var bindings: [APNsTokenBinding?] = Array(repeating: nil, count: 30)
        var uses: [[(issuedAt: Int64, since: Int64, realAge: Int64)]] = Array(repeating: [], count: 30)
        var stepped = before
        for minute in Int64(0)..<(3 * 60) {
            if minute == jumpAfter { stepped = after }
            for second in stride(from: Int64(0), to: 60, by: 20) {
                let real = minute * 60 + second
                mono.set(Double(real))
                wall.set(Double(Self.start + real + stepped))
                // Connection n opens at minute n and sends every 20 s from then on.
                for connection in 0..<30 where Int64(connection) <= minute {
                    let before = bindings[connection]?.token.issuedAt
                    guard let token = authenticator.token(forConnection: &bindings[connection]) else {
                        Issue.record("no token")
                        continue
                    }
                    if token.issuedAt != before {
                        uses[connection].append((token.issuedAt, real, Self.start + real - token.issuedAt))
                    }
                }
            }
        }
        return (uses, reported.withLock { $0 }, authenticator.clockJumps)
    }

    /// Every change at least 22 minutes (monotonic) after the one before, to a newer token; with
    /// `withinHour`, no token used an hour old by APNs's clock.
    private func check(_ uses: [[(issuedAt: Int64, since: Int64, realAge: Int64)]], withinHour: Bool = true) {
        for tokens in uses {
            for (use, next) in zip(tokens, tokens.dropFirst()) {
                #expect(next.since - use.since >= 22 * 60, "a token kept \(next.since - use.since) s")
                #expect(next.issuedAt > use.issuedAt, "never back to an older token")
                if withinHour {
                    #expect(next.since - use.since + use.realAge < 60 * 60, "a token used an hour old")
                }
            }
            #expect(tokens.count >= 3, "connections still move on to newer tokens")
        }
    }

    @Test(
        "a clock 5 minutes behind, corrected forward (or stepped 10 minutes ahead): no token changed within 22 minutes, none used an hour old; counted once"
    )
    func forward() throws {
        let corrected = try run(before: -300, after: 0)
        check(corrected.uses)
        #expect(corrected.jumps == [300] && corrected.counted == 1)
        let ahead = try run(after: 600)
        check(ahead.uses)
        #expect(ahead.jumps == [600] && ahead.counted == 1)
    }

    @Test(
        "a clock 2 minutes ahead, corrected back (or stepped 10 minutes behind): no token changed within 22 minutes, never an older one; counted once"
    )
    func backward() throws {
        let corrected = try run(before: 120, after: 0)
        check(corrected.uses)
        #expect(corrected.jumps == [-120] && corrected.counted == 1)
        // A clock now 10 minutes behind APNs's: beyond the schedule's 6-minute margin, its tokens
        // expire by APNs's clock whatever the worker does; the 22 minutes still hold.
        let behind = try run(after: -600)
        check(behind.uses, withinHour: false)
        #expect(behind.jumps == [-600] && behind.counted == 1)
    }

    @Test("a clock that does not jump: nothing counted, the same switches as the schedule's")
    func steady() throws {
        let (uses, jumps, counted) = try run(after: 0)
        check(uses)
        #expect(jumps.isEmpty && counted == 0)
        // Every switch when the token is 54 minutes old (the schedule's switch age), to the 20 s
        // between two requests.
        for tokens in uses {
            for (use, next) in zip(tokens, tokens.dropFirst()) {
                let age = next.since - use.since + use.realAge
                #expect(age >= 54 * 60 && age < 54 * 60 + 20, "switched at \(age) s")
            }
        }
    }
}
