import Foundation
import Testing

@testable import APNs

/// The client against an independent HTTP/2 + TLS implementation: Debian's nghttpd.
@Suite("Interop with nghttpd", .timeLimit(.minutes(2)))
struct NghttpdInteropTests {
    @Test("a POST is answered 200 with token auth, and 404 reads as a rejection")
    func deliveredAndNotFound() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki)
        defer { server.stop() }
        try await withClient(
            ClientFixtures.configuration(port: server.port, pki: pki), credential: ClientFixtures.tokenCredential(pki)
        ) {
            client in
            let ok = try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
            #expect(ok.status == 200)
            #expect(APNsOutcome.classify(ok) == .delivered)
            #expect(ok.latency > .zero)
            let missing = try await client.send(try ClientFixtures.notification(token: "0123456789abcdef"))
            #expect(missing.status == 404)
            #expect(missing.reason == nil)
            #expect(APNsOutcome.classify(missing) == .rejected(nil))
        }
    }

    @Test("500 concurrent sends over 2 connections limited to 5 streams each: every one answered")
    func manyConcurrentSends() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki, arguments: ["-m", "5"])
        defer { server.stop() }
        var configuration = ClientFixtures.configuration(port: server.port, pki: pki)
        configuration.maximumWaitingRequests = 1000
        let statuses = try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<500 {
                    let token = index % 5 == 0 ? "0123456789abcdef" : Nghttpd.deliveredToken
                    group.addTask { try await client.send(try ClientFixtures.notification(token: token)).status }
                }
                return try await group.reduce(into: [Int: Int]()) { $0[$1, default: 0] += 1 }
            }
        }
        #expect(statuses == [200: 400, 404: 100])
    }

    @Test("certificate authentication presents the client certificate (nghttpd -V demands one)")
    func certificateAuthentication() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki, arguments: ["-V"])
        defer { server.stop() }
        let identity = try APNsCertificateIdentity(pkcs12File: pki.clientPKCS12, password: pki.pkcs12Password)
        try await withClient(
            ClientFixtures.configuration(port: server.port, pki: pki), credential: .certificate(identity)
        ) {
            client in
            let response = try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
            #expect(response.status == 200)
        }
    }

    @Test("a server certificate from another CA is refused, and the outcome is credentialsBroken")
    func wrongCARefused() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki)
        defer { server.stop() }
        let configuration = ClientFixtures.configuration(port: server.port, pki: pki, caFile: pki.otherCACertificate)
        try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            do {
                _ = try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
                Issue.record("sent through a server the CA does not vouch for")
            } catch let error as APNsClientError {
                #expect(error.code == .serverCertificateRejected)
                #expect(error.mayHaveReachedAPNs == false)
                #expect(!error.isRetriable)
                #expect(APNsOutcome.classify(error) == .credentialsBroken("serverCertificateRejected"))
            }
        }
    }

    // apns.caFile was documented as extra trust anchors but replaced the system store.
    @Test("trust .systemAnd(caFile:) adds the file's roots to the system store: the test CA's server is trusted")
    func systemPlusCAFile() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki)
        defer { server.stop() }
        var configuration = ClientFixtures.configuration(port: server.port, pki: pki)
        configuration.tls.trust = .systemAnd(caFile: pki.caCertificate)
        try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            let response = try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
            #expect(response.status == 200)
        }
        // The system store alone does not know the test CA: proof the file's roots were what counted.
        configuration.tls.trust = .system
        try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            let error = await #expect(throws: APNsClientError.self) {
                try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
            }
            #expect(error?.code == .serverCertificateRejected)
        }
    }

    @Test("a certificate for another host name is refused")
    func wrongHostRefused() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki)
        defer { server.stop() }
        let configuration = ClientFixtures.configuration(
            port: server.port, pki: pki, serverName: "api.push.apple.com")
        try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            let error = await #expect(throws: APNsClientError.self) {
                try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
            }
            #expect(error?.code == .serverCertificateRejected)
            #expect(error?.message.contains("mismatch") == true)
        }
    }

    @Test("an IP address is verified against the certificate's IP SAN")
    func ipAddressHost() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki)
        defer { server.stop() }
        let configuration = ClientFixtures.configuration(port: server.port, pki: pki, host: "127.0.0.1")
        try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            let response = try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
            #expect(response.status == 200)
        }
    }

    @Test("a request without an answer fails at its deadline, reported as possibly sent")
    func requestDeadline() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki)
        defer { server.stop() }
        var configuration = ClientFixtures.configuration(port: server.port, pki: pki, connections: 1)
        configuration.requestTimeout = .milliseconds(600)
        try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            let start = ContinuousClock.now
            let error = await #expect(throws: APNsClientError.self) {
                try await client.send(try ClientFixtures.notification(token: Nghttpd.hangingToken))
            }
            #expect(error?.code == .deadlineExceeded)
            #expect(error?.mayHaveReachedAPNs == true)
            // A 0.6 s deadline. The bound is loose on purpose: the 20,000-notification runs share this
            // process's cooperative pool (2 threads here), which delays resuming the caller, not the deadline.
            #expect(ContinuousClock.now - start < .seconds(15))
            #expect(APNsOutcome.classify(error!) == .retryLater(perDeviceToken: false, mayHaveReachedAPNs: true))
        }
    }

    @Test("an unanswered PING closes the connection and fails its streams with pingTimeout")
    func pingTimeout() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki)
        defer { server.stop() }
        var configuration = ClientFixtures.configuration(port: server.port, pki: pki, connections: 1)
        configuration.pingInterval = .milliseconds(200)
        configuration.pingTimeout = .milliseconds(300)
        try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            let start = ContinuousClock.now
            let error = await #expect(throws: APNsClientError.self) {
                try await client.send(try ClientFixtures.notification(token: Nghttpd.hangingToken))
            }
            #expect(error?.code == .pingTimeout)
            #expect(error?.mayHaveReachedAPNs == true)
            // 0.5 s of PING; loose for the same reason as the deadline test's bound.
            #expect(ContinuousClock.now - start < .seconds(15))
        }
    }

    @Test("the server going away abruptly: the next send fails retriably, then the pool reconnects")
    func abruptCloseAndReconnect() async throws {
        let pki = try TestPKI()
        let first = try Nghttpd(pki: pki)
        let configuration = ClientFixtures.configuration(port: first.port, pki: pki, connections: 1)
        try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
            let response = try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
            #expect(response.status == 200)
            first.stop()
            do {
                _ = try await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken))
                Issue.record("a send succeeded with the server gone")
            } catch let error as APNsClientError {
                #expect(error.isRetriable)
                #expect(error.mayHaveReachedAPNs == false)
            }
            let second = try Nghttpd(pki: pki, port: first.port)
            defer { second.stop() }
            var status = 0
            for _ in 0..<50 where status != 200 {
                status =
                    (try? await client.send(try ClientFixtures.notification(token: Nghttpd.deliveredToken)).status) ?? 0
                if status != 200 { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(status == 200)
        }
    }

    @Test("shutdown waits for the requests in flight and then refuses new ones")
    func gracefulShutdown() async throws {
        let pki = try TestPKI()
        let server = try Nghttpd(pki: pki)
        defer { server.stop() }
        let client = try APNsClient(
            configuration: ClientFixtures.configuration(port: server.port, pki: pki),
            credential: ClientFixtures.tokenCredential(pki))
        let notification = try ClientFixtures.notification(token: Nghttpd.deliveredToken)
        let warmUp = try await client.send(notification)
        #expect(warmUp.status == 200)
        let answers = Task {
            await withTaskGroup(of: String.self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        do {
                            return "\(try await client.send(notification).status)"
                        } catch let error as APNsClientError {
                            return error.code.rawValue
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                return await group.reduce(into: [String: Int]()) { $0[$1, default: 0] += 1 }
            }
        }
        try await Task.sleep(for: .milliseconds(20))
        await client.shutdown()
        // Every request accepted before shutdown was answered; later ones were refused, none was cut.
        let outcomes = await answers.value
        #expect(outcomes.values.reduce(0, +) == 100)
        #expect(Set(outcomes.keys).isSubset(of: ["200", "shutDown"]))
    }
}
