import APNsSimulator
import Foundation
import Testing

extension Fixture {
    /// Channels of `topic` made at start: Most Recent Message Stored, and No Message Stored.
    static let storedChannel = "c3RvcmVkLWNoYW5uZWwtMDE="
    static let unstoredChannel = "dW5zdG9yZWQtY2hhbm5lbC0x"
    /// A channel of `otherApp`.
    static let otherApp = "com.example.other"
    static let otherAppChannel = "b3RoZXItYXBwLWNoYW5uZWw="
    /// Well-formed, never created.
    static let unknownChannel = "dW5rbm93bi1jaGFubmVsIQ=="
    /// An app the token may push to but without the broadcast capability.
    static let noBroadcastApp = "com.example.nobroadcast"
    /// An app the test key's topics do not include.
    static let strangerApp = "com.example.stranger"
    static let broadcastPayload = #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":1}}}"#
    static let createBody = #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#

    /// The broadcast setup: the key may push to `topic`, `otherApp` and `noBroadcastApp`; the three
    /// channels above exist; `noBroadcastApp` has no broadcast capability.
    static func broadcastSetup(_ key: TestSigningKey) -> (inout SimulatorConfiguration) -> Void {
        { config in
            config.tokenKeys = [key.trusted(topics: [topic, otherApp, noBroadcastApp])]
            config.channels = [
                .init(bundleID: topic, storagePolicy: .mostRecentMessageStored, id: storedChannel),
                .init(bundleID: topic, storagePolicy: .noMessageStored, id: unstoredChannel),
                .init(bundleID: otherApp, storagePolicy: .mostRecentMessageStored, id: otherAppChannel),
            ]
            config.broadcastDisabledBundleIDs = [noBroadcastApp]
        }
    }
}

extension RawHTTP2Client {
    /// A broadcast's headers, in this order; a nil value leaves the header out.
    static func broadcastHeaders(
        path: String = "/4/broadcasts/apps/" + Fixture.topic,
        method: String = "POST",
        channelID: String? = Fixture.storedChannel,
        pushType: String? = "liveactivity",
        expiration: String? = "0",
        priority: String? = "10",
        requestID: String? = nil,
        authorization: String?,
        extra: [(String, String)] = []
    ) -> [(String, String)] {
        var headers = [(":method", method), (":scheme", "https"), (":path", path), (":authority", "localhost")]
        let optional: [(String, String?)] = [
            ("authorization", authorization), ("apns-channel-id", channelID), ("apns-push-type", pushType),
            ("apns-expiration", expiration), ("apns-priority", priority), ("apns-request-id", requestID),
        ]
        for case (let name, let value?) in optional { headers.append((name, value)) }
        return headers + extra
    }

    /// A channel-management request's headers, in this order; a nil value leaves the header out.
    static func managementHeaders(
        method: String?,
        bundleID: String = Fixture.topic,
        endpoint: String = "channels",
        path: String? = nil,
        channelID: String? = nil,
        requestID: String? = nil,
        authorization: String?,
        extra: [(String, String)] = []
    ) -> [(String, String)] {
        var headers = [
            (":scheme", "https"), (":path", path ?? "/1/apps/\(bundleID)/\(endpoint)"), (":authority", "localhost"),
        ]
        if let method { headers.insert((":method", method), at: 0) }
        let optional: [(String, String?)] = [
            ("authorization", authorization), ("apns-channel-id", channelID), ("apns-request-id", requestID),
        ]
        for case (let name, let value?) in optional { headers.append((name, value)) }
        return headers + extra
    }
}

/// Simulator with the broadcast setup + a raw connection to each listener, all cleaned up.
func withBroadcastConnections(
    key: TestSigningKey = TestSigningKey(),
    _ adjust: (inout SimulatorConfiguration) throws -> Void = { _ in },
    _ body: (Simulator, _ push: RawHTTP2Client, _ management: RawHTTP2Client) async throws -> Void
) async throws {
    try await withSimulator(
        key: key,
        {
            Fixture.broadcastSetup(key)(&$0)
            try adjust(&$0)
        }
    ) { simulator, _ in
        try await withClientGroup { group in
            let ca = simulator.certificateAuthorityPath!
            let push = try await RawHTTP2Client.connect(group: group, port: simulator.port, caPath: ca)
            let management = try await RawHTTP2Client.connect(
                group: group, port: simulator.managementPort, caPath: ca)
            do {
                try await body(simulator, push, management)
            } catch {
                await push.close()
                await management.close()
                throw error
            }
            await push.close()
            await management.close()
        }
    }
}

extension RawResponse {
    /// The `apns-request-id` answered, which broadcasts and channel management carry instead of `apns-id`.
    var requestID: String? { headers.first(name: "apns-request-id") }

    /// The answer's JSON body as a dictionary.
    var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
    }
}

/// A lowercase 8-4-4-4-12 UUID.
func isLowercaseUUID(_ text: String?) -> Bool {
    guard let text, let uuid = UUID(uuidString: text) else { return false }
    return uuid.uuidString.lowercased() == text
}

/// One request with a client certificate of the app (`ownTopics`) and one with another app's, on the
/// listener `port` picks: the app's is answered `success`, the other's 403 TopicMismatch.
func expectCertificateTrust(
    ownTopics: [String], success: Int, port: (Simulator) -> Int, headers: [(String, String)], body: String,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let authority = try SimulatorCertificateAuthority()
    let own = try authority.issueClientCertificate(topics: ownTopics)
    let other = try authority.issueClientCertificate(topics: [Fixture.otherApp])
    let key = TestSigningKey()
    try await withSimulator(
        key: key,
        {
            Fixture.broadcastSetup(key)(&$0)
            $0.clientCertificateAuthorityPEM = try authority.certificatePEM
        }
    ) { simulator, _ in
        try await withClientGroup { group in
            let cases: [(IssuedCertificate, Int, String?)] = [(own, success, nil), (other, 403, "TopicMismatch")]
            for (certificate, status, reason) in cases {
                let client = try await RawHTTP2Client.connect(
                    group: group, port: port(simulator), caPath: simulator.certificateAuthorityPath!,
                    clientCertificate: certificate)
                client.send(stream: 1, headers: headers, body: body)
                let answer = try await client.response(stream: 1)
                #expect(answer.status == status, sourceLocation: sourceLocation)
                #expect(answer.reason == reason, sourceLocation: sourceLocation)
                await client.close()
            }
        }
    }
}
