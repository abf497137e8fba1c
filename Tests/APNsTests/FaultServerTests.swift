import Foundation
import Synchronization
import Testing

@testable import APNs

/// The client against a scripted HTTP/2 peer (hyper-h2) that answers like APNs and misbehaves on
/// demand: every row of the outcome table over the wire, stream limits, GOAWAY, abrupt close, and
/// the 20,000-notification fault run.
@Suite("APNs behaviour against a scripted HTTP/2 peer", .timeLimit(.minutes(3)))
struct FaultServerTests {
    static let rows: [(token: String, status: Int, reason: String, outcome: APNsOutcome)] = [
        ("0410aa", 410, "Unregistered", .unregistered(timestampMilliseconds: nil)),
        ("0410bb", 410, "ExpiredToken", .unregistered(timestampMilliseconds: nil)),
        ("0400aa", 400, "BadDeviceToken", .rejected(.badDeviceToken)),
        ("0400bb", 400, "DeviceTokenNotForTopic", .rejected(.deviceTokenNotForTopic)),
        ("0405aa", 405, "MethodNotAllowed", .rejected(.methodNotAllowed)),
        ("0413aa", 413, "PayloadTooLarge", .rejected(.payloadTooLarge)),
        ("0403aa", 403, "ExpiredProviderToken", .refreshToken),
        ("0403bb", 403, "InvalidProviderToken", .credentialsBroken("InvalidProviderToken")),
        ("0403cc", 403, "BadCertificate", .credentialsBroken("BadCertificate")),
        ("0403dd", 403, "BadCertificateEnvironment", .credentialsBroken("BadCertificateEnvironment")),
        ("0403ee", 403, "Forbidden", .credentialsBroken("Forbidden")),
        ("0403ff", 403, "MissingProviderToken", .credentialsBroken("MissingProviderToken")),
        ("0429aa", 429, "TooManyRequests", .retryLater(perDeviceToken: true, mayHaveReachedAPNs: true)),
        ("0429bb", 429, "TooManyProviderTokenUpdates", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
        ("0500aa", 500, "InternalServerError", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
        ("0503aa", 503, "ServiceUnavailable", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
        ("0503bb", 503, "Shutdown", .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true)),
    ]

    @Test(
        "every row of the outcome table, over TLS with token auth; TooManyProviderTokenUpdates retires its connection")
    func outcomeTableOverTheWire() async throws {
        let pki = try TestPKI()
        let answers = Dictionary(uniqueKeysWithValues: Self.rows.map { ($0.token, [$0.status, $0.reason] as [Any]) })
        let json = String(decoding: try JSONSerialization.data(withJSONObject: answers), as: UTF8.self)
        let server = try FaultServer(
            pki: pki, ["--answers", json, "--initial-streams", "1", "--streams-after-success", "100"])
        defer { server.stop() }
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: APNsSigningKey(file: pki.tokenKey))
        let configuration = ClientFixtures.configuration(port: server.port, pki: pki, host: "127.0.0.1")
        try await withClient(configuration, credential: .token(authenticator)) { client in
            let ok = try await client.send(try ClientFixtures.notification(token: "0200aa"))
            #expect(APNsOutcome.classify(ok) == .delivered)
            #expect(ok.apnsUniqueID != nil)
            for row in Self.rows {
                let notification = try ClientFixtures.notification(token: row.token)
                let response = try await client.send(notification)
                #expect(response.status == row.status, "\(row.reason)")
                #expect(response.reason == APNsReason(row.reason))
                #expect(response.apnsID == notification.apnsID?.uuidString)
                if row.status == 410 {
                    #expect(response.timestampMilliseconds != nil)
                    #expect(
                        APNsOutcome.classify(response)
                            == .unregistered(timestampMilliseconds: response.timestampMilliseconds))
                } else {
                    #expect(APNsOutcome.classify(response) == row.outcome, "\(row.reason)")
                }
            }
            // Ten more ExpiredProviderToken answers: still the period's one token (nothing to refresh).
            for _ in 0..<10 { _ = try await client.send(try ClientFixtures.notification(token: "0403aa")) }
            #expect(client.statistics.retiredConnections["ExpiredProviderToken"] == nil)
            #expect(client.statistics.retiredConnections["TooManyProviderTokenUpdates"] == 1)
        }
        #expect(authenticator.tokensSigned == 1)
    }

    // The token of a period is fixed: an ExpiredProviderToken answer (this pod's clock behind APNs's)
    // signs nothing new and closes no connection, whether the send was awaited or called back: a
    // new connection would take the same token.
    @Test("ExpiredProviderToken neither replaces the period's token nor retires the connection")
    func expiredProviderTokenChangesNothing() async throws {
        let pki = try TestPKI()
        let server = try FaultServer(pki: pki, ["--answers", #"{"0403aa": [403, "ExpiredProviderToken"]}"#])
        defer { server.stop() }
        let clock = ManualClock()
        let authenticator = try APNsTokenAuthenticator(
            teamID: "TEAM123456", keyID: "KEY1234567", key: APNsSigningKey(file: pki.tokenKey), clock: clock,
            epochNow: 1_800_000_000)
        let configuration = ClientFixtures.configuration(port: server.port, pki: pki, host: "127.0.0.1")
        try await withClient(configuration, credential: .token(authenticator)) { client in
            let expired = try ClientFixtures.notification(token: "0403aa")
            let awaited = try await client.send(expired)
            #expect(awaited.reason == .expiredProviderToken)
            let calledBack: Result<APNsResponse, any Error> = await withCheckedContinuation { continuation in
                client.send(expired) { continuation.resume(returning: $0) }
            }
            #expect(try calledBack.get().reason == .expiredProviderToken)
            #expect(authenticator.tokensSigned == 1)
            #expect(client.statistics.retiredConnections.isEmpty)
        }
    }

    @Test("token auth: one stream until the first success, then the raised limit is used and never exceeded")
    func streamLimitRisesAfterFirstSuccess() async throws {
        let pki = try TestPKI()
        let server = try FaultServer(
            pki: pki, ["--initial-streams", "1", "--streams-after-success", "1000", "--delay-ms", "20"])
        defer { server.stop() }
        var configuration = ClientFixtures.configuration(port: server.port, pki: pki, host: "127.0.0.1", connections: 1)
        configuration.maximumWaitingRequests = 1000
        let statuses = try await withClient(configuration, credential: try ClientFixtures.tokenCredential(pki)) {
            client in
            try await sendMany(client, count: 300, token: "0200aa")
        }
        #expect(statuses == ["200": 300])
        let stats = try server.stats()
        #expect(stats.over_limit == 0)
        #expect(stats.max_open > 10, "the limit rose after the first success")
    }

    @Test("a limit dropped to 1 mid-connection is obeyed at once and every request still answered")
    func limitDroppedMidConnection() async throws {
        let pki = try TestPKI()
        let server = try FaultServer(
            pki: pki, ["--initial-streams", "100", "--drop-streams-after", "50", "--delay-ms", "5"])
        defer { server.stop() }
        let identity = try APNsCertificateIdentity(certificateFile: pki.clientCertificate, keyFile: pki.clientKey)
        var configuration = ClientFixtures.configuration(port: server.port, pki: pki, host: "127.0.0.1", connections: 1)
        configuration.maximumWaitingRequests = 1000
        let statuses = try await withClient(configuration, credential: .certificate(identity)) { client in
            try await sendMany(client, count: 300, token: "0200aa")
        }
        #expect(statuses == ["200": 300])
        #expect(try server.stats().over_limit == 0)
    }

    @Test(
        "GOAWAY after N requests, again on every connection: streams refused more often than the pool resends come back as not sent, with the reason"
    )
    func goAwayHandsBackUnprocessedStreams() async throws {
        let (results, _) = try await sendThroughGoAways(after: 10, count: 60)
        #expect(results.count == 60)
        let delivered = results.filter { $0.status == 200 }.count
        let notSent = results.compactMap(\.error)
        #expect(delivered >= 10)
        #expect(notSent.contains { $0.code == .goAway })
        // Not processed: above last-stream-id (goAway), or written as the drained connection closed.
        #expect(notSent.allSatisfy { !$0.mayHaveReachedAPNs && $0.isRetriable }, "\(notSent)")
        #expect(notSent.contains { $0.goAwayReason == "Shutdown" })
        #expect(delivered + notSent.count == 60, "\(results.compactMap(\.error))")
    }

    @Test(
        "GOAWAY refuses the requests queued behind it: the pool sends them again on a new connection, and all are delivered"
    )
    func goAwayRefusedRequestsGoAgain() async throws {
        // Every connection takes 25 requests, then refuses the rest with GOAWAY: 60 requests at once
        // need three connections. Refused requests were never processed (RFC 9113 §6.8); handing
        // them back as failures made the worker count an attempt APNs never saw.
        let (results, stats) = try await sendThroughGoAways(after: 25, count: 60)
        #expect(results.count == 60)
        #expect(results.allSatisfy { $0.status == 200 }, "\(results.compactMap(\.error))")
        #expect(stats.connections >= 3)
    }

    /// `count` requests at once on one connection (certificate auth) to a peer that answers 50 ms
    /// late and sends GOAWAY after `after` requests on every connection; what came back, and the
    /// peer's counts.
    private func sendThroughGoAways(after: Int, count: Int) async throws -> ([SendResult], FaultServer.Stats) {
        let pki = try TestPKI()
        let server = try FaultServer(pki: pki, ["--goaway-after", "\(after)", "--delay-ms", "50"])
        defer { server.stop() }
        let identity = try APNsCertificateIdentity(certificateFile: pki.clientCertificate, keyFile: pki.clientKey)
        let configuration = ClientFixtures.configuration(port: server.port, pki: pki, host: "127.0.0.1", connections: 1)
        let results = try await withClient(configuration, credential: .certificate(identity)) { client in
            try await sendManyDetailed(client, count: count, token: "0200aa")
        }
        return (results, try server.stats())
    }

    @Test("abrupt close with requests in flight: each fails once, as possibly sent, and is retryable")
    func abruptClose() async throws {
        let pki = try TestPKI()
        let server = try FaultServer(pki: pki, ["--close-after", "5", "--delay-ms", "200"])
        defer { server.stop() }
        let identity = try APNsCertificateIdentity(certificateFile: pki.clientCertificate, keyFile: pki.clientKey)
        let configuration = ClientFixtures.configuration(port: server.port, pki: pki, host: "127.0.0.1", connections: 1)
        let results = try await withClient(configuration, credential: .certificate(identity)) { client in
            try await sendManyDetailed(client, count: 20, token: "0200aa")
        }
        #expect(results.count == 20)
        let lost = results.compactMap(\.error).filter { $0.code == .connectionLost }
        #expect(!lost.isEmpty)
        #expect(lost.allSatisfy { $0.isRetriable })
        #expect(lost.contains { $0.mayHaveReachedAPNs })
    }

    @Test("20,000 notifications, 4 connections, 5% 503 and 5% 429: exactly one answer each, none lost or hung")
    func faultRun() async throws {
        let pki = try TestPKI()
        let server = try FaultServer(pki: pki, ["--rate-503", "0.05", "--rate-429", "0.05", "--seed", "7"])
        defer { server.stop() }
        var configuration = ClientFixtures.configuration(port: server.port, pki: pki, host: "127.0.0.1", connections: 4)
        configuration.maximumWaitingRequests = 20_000
        configuration.requestTimeout = .seconds(60)
        let start = ContinuousClock.now
        let statuses = try await withClient(configuration, credential: try ClientFixtures.tokenCredential(pki)) {
            client in
            try await sendMany(client, count: 20_000, token: "0200aa", concurrency: 400)
        }
        let elapsed = ContinuousClock.now - start
        #expect(statuses.values.reduce(0, +) == 20_000)
        #expect(Set(statuses.keys) == ["200", "429", "503"], "\(statuses)")
        #expect((800...1200).contains(statuses["503"] ?? 0))
        #expect((800...1200).contains(statuses["429"] ?? 0))
        let stats = try server.stats()
        #expect(stats.answered == 20_000 + 0, "server answered each exactly once")
        print("fault run: \(statuses) in \(elapsed), server saw \(stats.connections - 1) connections")
    }
}

struct SendResult: Sendable {
    var status: Int?
    var error: APNsClientError?
}

/// Sends `count` notifications, at most `concurrency` at a time; counts answers by status, and
/// failures by error code.
func sendMany(_ client: APNsClient, count: Int, token: String, concurrency: Int = 1000) async throws -> [String: Int] {
    let results = try await sendManyDetailed(client, count: count, token: token, concurrency: concurrency)
    return results.reduce(into: [:]) { counts, result in
        counts[result.status.map(String.init) ?? result.error?.code.rawValue ?? "?", default: 0] += 1
    }
}

func sendManyDetailed(
    _ client: APNsClient, count: Int, token: String, concurrency: Int = 1000
) async throws -> [SendResult] {
    let notification = try ClientFixtures.notification(token: token)
    return await withTaskGroup(of: SendResult.self) { group in
        var results: [SendResult] = []
        results.reserveCapacity(count)
        var started = 0
        func startOne() {
            group.addTask {
                do {
                    return SendResult(status: try await client.send(notification).status)
                } catch let error as APNsClientError {
                    return SendResult(error: error)
                } catch {
                    return SendResult(error: APNsClientError(.protocolError, "\(error)", mayHaveReachedAPNs: true))
                }
            }
            started += 1
        }
        while started < min(concurrency, count) { startOne() }
        while let result = await group.next() {
            results.append(result)
            if started < count { startOne() }
        }
        return results
    }
}
