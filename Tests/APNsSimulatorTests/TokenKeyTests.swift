import APNsSimulator
import Foundation
import Testing

@Suite("Token keys: related keys on a connection, keys of one environment")
struct TokenKeyTests {
    let first = TestSigningKey(teamID: "TEAM123456", keyID: "KEY1234567")
    let second = TestSigningKey(teamID: "TEAM123456", keyID: "KEY7654321")

    /// Pushes with `authorizations` in order on one connection; the answers' (status, reason).
    func pushes(
        _ authorizations: [String], _ adjust: (inout SimulatorConfiguration) -> Void
    ) async throws -> [(Int, String?)] {
        var answers: [(Int, String?)] = []
        try await withRawConnection(
            key: first,
            {
                $0.tokenUpdateWindow = 0
                adjust(&$0)
            }
        ) { (_: Simulator, client: RawHTTP2Client) async throws in
            for (i, authorization) in authorizations.enumerated() {
                client.send(stream: 1 + 2 * i, headers: RawHTTP2Client.apnsHeaders(authorization: authorization))
                let answer = try await client.response(stream: 1 + 2 * i)
                answers.append((answer.status, answer.reason))
            }
        }
        return answers
    }

    @Test("a token of another key of the team on the same connection is UnrelatedKeyIdInToken; the first key goes on")
    func unrelatedKey() async throws {
        let answers = try await pushes(
            [first.authorization(), second.authorization(), first.authorization()],
            { $0.tokenKeys = [first.trusted(), second.trusted()] })
        #expect(answers.map(\.0) == [200, 403, 200])
        #expect(answers[1].1 == "UnrelatedKeyIdInToken")
    }

    @Test("a new connection may start with the other key")
    func newConnection() async throws {
        let answers = try await pushes(
            [second.authorization(), first.authorization()], { $0.tokenKeys = [first.trusted(), second.trusted()] })
        #expect(answers.map(\.0) == [200, 403])
        #expect(answers[1].1 == "UnrelatedKeyIdInToken")
    }

    @Test("related keys share a connection, whichever of the two names the relation", arguments: [true, false])
    func relatedKeys(firstNamesIt: Bool) async throws {
        let answers = try await pushes(
            [first.authorization(), second.authorization(), first.authorization()],
            { config in
                var a = first.trusted()
                var b = second.trusted()
                if firstNamesIt { a.relatedKeyID = b.keyID } else { b.relatedKeyID = a.keyID }
                config.tokenKeys = [a, b]
            })
        #expect(answers.map(\.0) == [200, 200, 200])
    }

    @Test("a key of another team on the connection stays InvalidProviderToken")
    func otherTeam() async throws {
        let stranger = TestSigningKey(teamID: "OTHERTEAM1", keyID: "OTHERKEY12")
        let answers = try await pushes(
            [first.authorization(), stranger.authorization()], { $0.tokenKeys = [first.trusted(), stranger.trusted()] })
        #expect(answers[1].1 == "InvalidProviderToken")
    }

    struct EnvironmentCase: Sendable, CustomTestStringConvertible {
        var key: SimulatorEnvironment?
        var served: SimulatorEnvironment
        var status: Int
        var testDescription: String { "key \(key?.rawValue ?? "both") on \(served.rawValue) → \(status)" }
    }

    @Test(
        "a key of one environment works there and gets BadEnvironmentKeyIdInToken on the other, on both listeners",
        arguments: [
            EnvironmentCase(key: nil, served: .production, status: 200),
            EnvironmentCase(key: nil, served: .development, status: 200),
            EnvironmentCase(key: .production, served: .production, status: 200),
            EnvironmentCase(key: .development, served: .development, status: 200),
            EnvironmentCase(key: .development, served: .production, status: 403),
            EnvironmentCase(key: .production, served: .development, status: 403),
        ])
    func keyEnvironment(_ c: EnvironmentCase) async throws {
        let signing = TestSigningKey()
        try await withBroadcastConnections(
            key: signing,
            {
                $0.environment = c.served
                $0.tokenKeys[0].environment = c.key
            }
        ) { _, push, management in
            push.send(stream: 1, headers: RawHTTP2Client.apnsHeaders(authorization: signing.authorization()))
            let device = try await push.response(stream: 1)
            push.send(
                stream: 3, headers: RawHTTP2Client.broadcastHeaders(authorization: signing.authorization()),
                body: Fixture.broadcastPayload)
            let broadcast = try await push.response(stream: 3)
            management.send(
                stream: 1,
                headers: RawHTTP2Client.managementHeaders(
                    method: "GET", endpoint: "all-channels", authorization: signing.authorization()),
                body: nil)
            let list = try await management.response(stream: 1)
            for answer in [device, broadcast, list] {
                #expect(answer.status == c.status)
                #expect(answer.reason == (c.status == 403 ? "BadEnvironmentKeyIdInToken" : nil))
            }
        }
    }
}
