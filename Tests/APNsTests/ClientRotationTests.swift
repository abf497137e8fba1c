import APNsSimulator
import Crypto
import Foundation
import TestPeers
import Testing

@testable import APNs

/// A key or certificate replaced under a client that is sending (`replaceCredential`), against the
/// simulator with APNs's token rules on: nothing fails, new connections use the new credential, and
/// those open before are replaced one per interval.
@Suite("Client: credential rotation against the simulator", .timeLimit(.minutes(2)))
struct ClientRotationTests {
    static let newKeyID = "KEY7654321"

    /// The `kid` of a recorded request's provider token.
    static func keyID(_ record: NotificationRecord) -> String? {
        record.headers.first(where: { $0.name == "authorization" }).flatMap {
            providerTokenKeyID(authorization: $0.value)
        }
    }

    private func withSimulator<T>(
        newKey: P256.Signing.PrivateKey?, clientCA: Bool = false, _ body: (Simulator, TestPKI) async throws -> T
    ) async throws -> T {
        let trustNewKey: (inout SimulatorConfiguration) -> Void = { configuration in
            if let newKey {
                configuration.tokenKeys.append(
                    ProviderTokenKey(teamID: "TEAM123456", keyID: Self.newKeyID, publicKey: newKey.publicKey))
            }
        }
        return try await withTestSimulator(clientCA: clientCA, configure: trustNewKey, body)
    }

    /// Sends one notification every `every` for `duration`; returns the statuses.
    private func sendSteadily(_ client: APNsClient, for duration: Duration, every: Duration = .milliseconds(20))
        async throws -> [Int]
    {
        var statuses: [Int] = []
        let end = ContinuousClock.now + duration
        while ContinuousClock.now < end {
            statuses.append(try await client.send(try ClientFixtures.notification(token: "aabbccdd")).status)
            try await Task.sleep(for: every)
        }
        return statuses
    }

    @Test(
        "a token key replaced while sending: every request answered 200, the new key's tokens on new connections, the old connections replaced one per interval"
    )
    func tokenKeyRotation() async throws {
        let newKey = P256.Signing.PrivateKey()
        try await withSimulator(newKey: newKey) { simulator, pki in
            var configuration = ClientFixtures.configuration(
                port: simulator.port, pki: pki, host: "127.0.0.1", connections: 2)
            configuration.replaceInterval = .milliseconds(400)
            try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
                let before = try await sendSteadily(client, for: .milliseconds(300))
                #expect(before.allSatisfy { $0 == 200 })
                let opened = simulator.observation.totalConnections
                #expect(opened == 2)
                try client.replaceCredential(
                    .token(
                        try APNsTokenAuthenticator(
                            teamID: "TEAM123456", keyID: Self.newKeyID,
                            key: APNsSigningKey(pem: Array(newKey.pemRepresentation.utf8)))))
                // Sending on while the two connections are replaced (one per 400 ms), however slowly
                // the machine goes; then a few more, which only new connections can carry.
                var during: [Int] = []
                let deadline = ContinuousClock.now + .seconds(60)
                while client.statistics.retiredConnections[APNsPoolStatistics.credentialReloaded, default: 0] < 2,
                    ContinuousClock.now < deadline
                {
                    during += try await sendSteadily(client, for: .milliseconds(100))
                }
                #expect(during.allSatisfy { $0 == 200 }, "statuses: \(Set(during))")
                #expect(client.statistics.retiredConnections[APNsPoolStatistics.credentialReloaded] == 2)
                // A replaced connection may still finish what it had: the next requests go on new ones.
                while client.statistics.drainingConnections > 0, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                let afterwards = simulator.observation.records.count
                #expect(try await sendSteadily(client, for: .milliseconds(100)).allSatisfy { $0 == 200 })
                #expect(simulator.observation.totalConnections == opened + 2, "each connection replaced once")

                let records = simulator.observation.records
                let late = records.dropFirst(afterwards)
                #expect(!late.isEmpty && late.allSatisfy { Self.keyID($0) == Self.newKeyID })
                // A connection signs with one key all its life (no UnrelatedKeyIdInToken).
                var keys: [Int: Set<String>] = [:]
                for record in records { keys[record.connectionID, default: []].insert(Self.keyID(record) ?? "none") }
                #expect(keys.values.allSatisfy { $0.count == 1 }, "\(keys)")
                #expect(simulator.observation.count(status: 403) == 0 && simulator.observation.count(status: 429) == 0)
            }
        }
    }

    @Test(
        "a connection still on the key before, refused with InvalidProviderToken (the old key revoked), is replaced at once and its request answered on a current one"
    )
    func revokedOldKey() async throws {
        try await withSimulator(newKey: nil) { simulator, pki in
            var configuration = ClientFixtures.configuration(
                port: simulator.port, pki: pki, host: "127.0.0.1", connections: 1)
            // Long enough that only the refusal can replace the connection.
            configuration.replaceInterval = .seconds(60)
            let untrusted = try APNsTokenAuthenticator(
                teamID: "TEAM123456", keyID: "REVOKED123",
                key: APNsSigningKey(pem: Array(P256.Signing.PrivateKey().pemRepresentation.utf8)))
            try await withClient(configuration, credential: .token(untrusted)) { client in
                let refused = try await client.send(try ClientFixtures.notification(token: "aabbccdd"))
                #expect(refused.reason == .invalidProviderToken, "a current connection's refusal is the caller's")
                try client.replaceCredential(try ClientFixtures.tokenCredential(pki))
                let response = try await client.send(try ClientFixtures.notification(token: "aabbccdd"))
                #expect(response.status == 200, "\(response)")
                #expect(client.statistics.retiredConnections[APNsPoolStatistics.credentialReloaded] == 1)
                #expect(simulator.observation.totalConnections == 2)
            }
        }
    }

    @Test("a certificate replaced while sending: every request answered 200, each connection reopened with it")
    func certificateRotation() async throws {
        try await withSimulator(newKey: nil, clientCA: true) { simulator, pki in
            var configuration = ClientFixtures.configuration(
                port: simulator.port, pki: pki, host: "127.0.0.1", connections: 2)
            configuration.replaceInterval = .milliseconds(300)
            let identity = try APNsCertificateIdentity(certificateFile: pki.clientCertificate, keyFile: pki.clientKey)
            try await withClient(configuration, credential: .certificate(identity)) { client in
                #expect(try await sendSteadily(client, for: .milliseconds(200)).allSatisfy { $0 == 200 })
                let renewed = try APNsCertificateIdentity(pkcs12File: pki.clientPKCS12, password: pki.pkcs12Password)
                try client.replaceCredential(.certificate(renewed))
                #expect(try await sendSteadily(client, for: .milliseconds(1200)).allSatisfy { $0 == 200 })
                #expect(client.statistics.retiredConnections[APNsPoolStatistics.credentialReloaded] == 2)
                #expect(simulator.observation.totalConnections == 4)
                let token = try ClientFixtures.tokenCredential(pki)
                #expect(throws: APNsCredentialError.self, "a certificate is not replaced by a key") {
                    try client.replaceCredential(token)
                }
            }
        }
    }
}
