import APNsSimulator
import Foundation
import TestPeers
import Testing

@testable import APNs

/// APNs connections through a real HTTP CONNECT proxy (Debian's tinyproxy, started here), with TLS
/// and host-name verification end to end with the server behind it.
@Suite("Through an HTTP proxy (tinyproxy)", .serialized, .timeLimit(.minutes(2)))
struct ProxyTests {
    private func withSimulator(_ body: (Simulator, TestPKI) async throws -> Void) async throws {
        let pki = try TestPKI()
        let simulator = try await Simulator.startForTests(pki: pki)
        do {
            try await body(simulator, pki)
            try await simulator.shutdown()
        } catch {
            try? await simulator.shutdown()
            throw error
        }
    }

    @Test("notifications go through the proxy's CONNECT tunnel, with Basic authentication, and arrive")
    func throughTheProxy() async throws {
        let proxy = try TinyProxy(username: "push", password: "s3cr3t-pass")
        defer { proxy.stop() }
        try await withSimulator { simulator, pki in
            var configuration = ClientFixtures.configuration(port: simulator.port, pki: pki, connections: 1)
            configuration.proxy = APNsProxy(
                host: "127.0.0.1", port: proxy.port, username: "push", password: "s3cr3t-pass")
            try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
                for index in 0..<20 {
                    let response = try await client.send(
                        try ClientFixtures.notification(token: String(format: "aabb%04x", index)))
                    #expect(response.status == 200)
                }
            }
            #expect(simulator.observation.records.count == 20)
        }
        // One tunnel for the one connection, to the simulator's host name (TLS verified it as
        // localhost behind the proxy).
        #expect(proxy.log.contains("CONNECT localhost:"), "\(proxy.log)")
    }

    @Test("a proxy that refuses (a wrong password) fails the send as not sent, saying why")
    func refused() async throws {
        let proxy = try TinyProxy(username: "push", password: "right")
        defer { proxy.stop() }
        try await withSimulator { simulator, pki in
            var configuration = ClientFixtures.configuration(port: simulator.port, pki: pki, connections: 1)
            configuration.proxy = APNsProxy(host: "127.0.0.1", port: proxy.port, username: "push", password: "wrong")
            configuration.requestTimeout = .seconds(5)
            try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
                let error = await #expect(throws: APNsClientError.self) {
                    try await client.send(try ClientFixtures.notification(token: "aabb"))
                }
                #expect(error?.mayHaveReachedAPNs == false)
                #expect(
                    "\(String(describing: error))".contains(
                        "refused CONNECT localhost:\(simulator.port): HTTP/1.0 401"),
                    "\(String(describing: error))")
                #expect(!"\(String(describing: error))".contains("wrong"), "the password is never printed")
            }
            #expect(simulator.observation.records.isEmpty)
        }
    }

    @Test("a proxy that accepts the connection and never answers: the connection fails at the connect timeout")
    func silentProxy() async throws {
        // A listening socket nobody reads: the kernel completes the TCP handshake, nothing answers.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        try #require(listening)
        let port = Int(UInt16(bigEndian: address.sin_port))
        try await withSimulator { simulator, pki in
            var configuration = ClientFixtures.configuration(port: simulator.port, pki: pki, connections: 1)
            configuration.proxy = APNsProxy(host: "127.0.0.1", port: port)
            configuration.connectTimeout = .seconds(1)
            configuration.requestTimeout = .seconds(60)
            try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) { client in
                let started = ContinuousClock.now
                let error = await #expect(throws: APNsClientError.self) {
                    try await client.send(try ClientFixtures.notification(token: "aabb"))
                }
                #expect("\(String(describing: error))".contains("did not answer CONNECT in time"))
                #expect(
                    ContinuousClock.now - started < .seconds(30), "the 1 s connect deadline, not the request's 60 s")
            }
        }
    }

    // The answer's status line was read as Characters up to "\r", and "\r\n" is one Character: the
    // "status line" was the proxy's whole header, so a 200 without a reason phrase was refused and
    // every header the proxy sent was copied into the error.
    @Test(
        "any 2xx answer to CONNECT opens the tunnel, whatever follows the status code",
        arguments: [
            "HTTP/1.1 200\r\n\r\n",
            "HTTP/1.1 200 Connection established\r\nProxy-Agent: scripted/1.0\r\nVia: 1.1 edge\r\n\r\n",
            "HTTP/1.0 201 Created\r\n\r\n",
            "HTTP/1.1 204\r\nX-Trace: 1\r\n\r\n",
        ])
    func anyTwoHundred(answer: String) async throws {
        try await withSimulator { simulator, pki in
            try await withScriptedProxy(answering: answer, simulator, pki) { client, proxy in
                let response = try await client.send(try ClientFixtures.notification(token: "aabb"))
                #expect(response.status == 200)
                #expect(
                    await proxy.currentStatistics.connectRequests == ["CONNECT localhost:\(simulator.port) HTTP/1.1"])
            }
            #expect(simulator.observation.records.count == 1)
        }
    }

    /// A client whose one connection goes through a proxy that answers CONNECT with `answer`.
    private func withScriptedProxy(
        answering answer: String, _ simulator: Simulator, _ pki: TestPKI,
        _ body: (APNsClient, FaultProxy) async throws -> Void
    ) async throws {
        let proxy = try await FaultProxy.start(
            upstreamHost: "127.0.0.1", upstreamPort: simulator.port, framing: .httpConnect(answer: answer))
        var configuration = ClientFixtures.configuration(port: simulator.port, pki: pki, connections: 1)
        configuration.proxy = APNsProxy(host: "127.0.0.1", port: proxy.port)
        configuration.requestTimeout = .seconds(5)
        do {
            try await withClient(configuration, credential: ClientFixtures.tokenCredential(pki)) {
                try await body($0, proxy)
            }
            await proxy.shutdown()
        } catch {
            await proxy.shutdown()
            throw error
        }
    }

    @Test("a refusal is quoted by its status line alone, cut short and without control characters")
    func refusalQuotedBriefly() async throws {
        let body = String(repeating: "denied by policy ", count: 20)
        let answers: [(answer: String, quoted: String)] = [
            (
                "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\n"
                    + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)",
                "HTTP/1.1 407 Proxy Authentication Required"
            ),
            ("HTTP/1.1 403 \u{1B}[31mForbidden\u{7}\r\n\r\n", "HTTP/1.1 403 ?[31mForbidden?"),
            (
                "HTTP/1.1 502 " + String(repeating: "x", count: 200) + "\r\n\r\n",
                "HTTP/1.1 502 " + String(repeating: "x", count: 67) + "…"
            ),
            ("SSH-2.0-OpenSSH_9.2\r\n\r\n", "SSH-2.0-OpenSSH_9.2"),
            ("HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 2000 OK"),
        ]
        try await withSimulator { simulator, pki in
            for (answer, quoted) in answers {
                try await withScriptedProxy(answering: answer, simulator, pki) { client, _ in
                    let error = await #expect(throws: APNsClientError.self) {
                        try await client.send(try ClientFixtures.notification(token: "aabb"))
                    }
                    let text = error.map { "\($0)" } ?? "no error"
                    #expect(error?.mayHaveReachedAPNs == false)
                    #expect(text.hasSuffix("refused CONNECT localhost:\(simulator.port): \(quoted)"), "\(text)")
                    #expect(!text.contains("realm") && !text.contains("denied by policy"), "\(text)")
                }
            }
            #expect(simulator.observation.records.isEmpty)
        }
    }

    @Test("proxy URLs, NO_PROXY rules, and a description that never shows the password")
    func proxyURLs() throws {
        let proxy = try APNsProxy(url: "http://us%40er:p%3Ass@proxy.corp:3128")
        #expect(proxy.host == "proxy.corp" && proxy.port == 3128)
        #expect(proxy.username == "us@er" && proxy.password == "p:ss")
        #expect(proxy.description == "http://us@er:<redacted>@proxy.corp:3128")
        #expect(proxy.authorization == "Basic " + Data("us@er:p:ss".utf8).base64EncodedString())
        #expect(try APNsProxy(url: "http://proxy").port == 80)
        #expect(throws: APNsProxy.ParseError.self) { try APNsProxy(url: "socks5://proxy:1080") }
        #expect(throws: APNsProxy.ParseError.self) { try APNsProxy(url: "proxy:3128") }
        #expect(APNsProxy.isExempt("api.push.apple.com", noProxy: "localhost, .apple.com"))
        #expect(APNsProxy.isExempt("api.push.apple.com", noProxy: "push.apple.com:443"))
        #expect(!APNsProxy.isExempt("api.push.apple.com", noProxy: "localhost,pple.com"))
        #expect(APNsProxy.isExempt("anything", noProxy: "*"))
    }
}
