import APNsSimulator
import Foundation
import Testing

@Suite("Certificate-based trust")
struct CertificateTrustTests {
    /// One request over a connection made with `certificate`; the configuration trusts `authority`.
    func answer(
        authority: SimulatorCertificateAuthority,
        certificate: IssuedCertificate,
        extra: [(String, String)] = [],
        topic: String? = Fixture.topic,
        pushType: String = "alert"
    ) async throws -> (RawResponse, Int?) {
        var result: (RawResponse, Int?)?
        try await withSimulator({
            $0.clientCertificateAuthorityPEM = try authority.certificatePEM; $0.maxConcurrentStreams = 500
        }) {
            simulator, _ in
            try await withClientGroup { group in
                let client = try await RawHTTP2Client.connect(
                    group: group, port: simulator.port, caPath: simulator.certificateAuthorityPath!,
                    clientCertificate: certificate)
                var headers = [
                    (":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + Fixture.device),
                    ("apns-push-type", pushType),
                ]
                if let topic { headers.append(("apns-topic", topic)) }
                client.send(stream: 1, headers: headers + extra)
                let response = try await client.response(stream: 1)
                result = (response, client.maxConcurrentStreams)
                await client.close()
            }
        }
        return try #require(result)
    }

    @Test("a valid client certificate pushes to its topics without a token, with no single-stream phase")
    func validCertificatePushesItsTopicsWithoutAToken() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: [Fixture.topic, Fixture.topic + ".voip"])
        let (response, streams) = try await answer(authority: authority, certificate: cert)
        #expect(response.status == 200)
        #expect(streams == 500, "no single-stream phase for certificate trust")
        let voip = try await answer(
            authority: authority, certificate: cert, topic: Fixture.topic + ".voip", pushType: "voip")
        #expect(voip.0.status == 200)
    }

    @Test("an authorization header is ignored on a certificate connection")
    func authorizationHeaderIsIgnoredWithACertificate() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: [Fixture.topic])
        let (response, _) = try await answer(
            authority: authority, certificate: cert, extra: [("authorization", "bearer junk")])
        #expect(response.status == 200)
    }

    @Test("a single-topic certificate needs no apns-topic header")
    func singleTopicCertificateNeedsNoTopicHeader() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: [Fixture.topic])
        #expect(try await answer(authority: authority, certificate: cert, topic: nil).0.status == 200)
    }

    @Test("a multi-topic certificate without apns-topic is MissingTopic")
    func multiTopicCertificateNeedsTheTopicHeader() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: [Fixture.topic, "com.example.second"])
        #expect(try await answer(authority: authority, certificate: cert, topic: nil).0.reason == "MissingTopic")
    }

    @Test("a topic the certificate does not name is 400 TopicDisallowed")
    func topicOutsideTheCertificateIsDisallowed() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: ["com.example.second"])
        let (response, _) = try await answer(authority: authority, certificate: cert)
        #expect(response.status == 400)
        #expect(response.reason == "TopicDisallowed")
    }

    @Test("location pushes need token trust: over a certificate they are TopicDisallowed")
    func locationNeedsTokenTrust() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: [Fixture.topic + ".location-query"])
        let (response, _) = try await answer(
            authority: authority, certificate: cert, topic: Fixture.topic + ".location-query", pushType: "location")
        #expect(response.reason == "TopicDisallowed")
    }

    @Test("a certificate from another authority is 403 BadCertificate")
    func certificateFromAnotherAuthorityIsBad() async throws {
        let authority = try SimulatorCertificateAuthority()
        let stranger = try SimulatorCertificateAuthority(commonName: "Somebody Else")
        let cert = try stranger.issueClientCertificate(topics: [Fixture.topic])
        let (response, _) = try await answer(authority: authority, certificate: cert)
        #expect(response.status == 403)
        #expect(response.reason == "BadCertificate")
    }

    @Test("an expired client certificate is BadCertificate")
    func expiredCertificateIsBad() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: [Fixture.topic], validFor: -3600)
        #expect(try await answer(authority: authority, certificate: cert).0.reason == "BadCertificate")
    }

    @Test("a development certificate on a production server is 403 BadCertificateEnvironment")
    func developmentCertificateOnProductionIsTheWrongEnvironment() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: [Fixture.topic], environment: .development)
        let (response, _) = try await answer(authority: authority, certificate: cert)
        #expect(response.status == 403)
        #expect(response.reason == "BadCertificateEnvironment")
    }

    @Test("nghttp with a client certificate gets 200, and the record shows the certificate's topic")
    func nghttpWithAClientCertificate() async throws {
        let authority = try SimulatorCertificateAuthority()
        let cert = try authority.issueClientCertificate(topics: [Fixture.topic])
        try await withSimulator({ $0.clientCertificateAuthorityPEM = try authority.certificatePEM }) { simulator, dir in
            let certFile = dir + "/client.pem"
            let keyFile = dir + "/client-key.pem"
            try cert.certificatePEM.write(toFile: certFile, atomically: true, encoding: .utf8)
            try cert.privateKeyPEM.write(toFile: keyFile, atomically: true, encoding: .utf8)
            let body = dir + "/body.json"
            try Fixture.payload.write(toFile: body, atomically: true, encoding: .utf8)
            let output = try await run(
                "/usr/bin/nghttp",
                [
                    "-v", "--cert=" + certFile, "--key=" + keyFile, "-d", body, "-H", "apns-topic: " + Fixture.topic,
                    "https://127.0.0.1:\(simulator.port)/3/device/\(Fixture.device)",
                ])
            #expect(NghttpAnswer(output.stdout).status == 200, "\(output.stdout.suffix(600))")
            #expect(simulator.observation.records.first?.topic == Fixture.topic)
        }
    }
}
