import Foundation

@testable import APNs

/// Builds clients aimed at a local test server, with short timers so failures show fast.
enum ClientFixtures {
    static func tokenCredential(_ pki: TestPKI) throws -> APNsCredential {
        .token(
            try APNsTokenAuthenticator(
                teamID: "TEAM123456", keyID: "KEY1234567", key: APNsSigningKey(file: pki.tokenKey)))
    }

    static func configuration(
        port: Int, pki: TestPKI, host: String = "localhost", caFile: String? = nil, serverName: String? = nil,
        connections: Int = 2
    ) -> APNsClientConfiguration {
        var configuration = APNsClientConfiguration(
            environment: .development, host: host, port: port,
            tls: APNsTLSConfiguration(trust: .caFile(caFile ?? pki.caCertificate), serverName: serverName))
        configuration.connectionsPerCredential = connections
        configuration.requestTimeout = .seconds(10)
        configuration.connectTimeout = .seconds(5)
        configuration.reconnectBase = .milliseconds(50)
        configuration.reconnectMaximum = .milliseconds(400)
        return configuration
    }

    static func notification(token: String, payload: String = #"{"aps":{"alert":"hello"}}"#) throws -> APNsNotification
    {
        APNsNotification(
            deviceToken: try APNsDeviceToken(token), topic: "com.example.app", pushType: .alert,
            apnsID: .random(), payload: Array(payload.utf8))
    }
}

/// Runs `body` with a client and always shuts the client down afterwards.
func withClient<T>(
    _ configuration: APNsClientConfiguration, credential: APNsCredential,
    _ body: (APNsClient) async throws -> T
) async throws -> T {
    let client = try APNsClient(configuration: configuration, credential: credential)
    do {
        let result = try await body(client)
        await client.shutdown()
        return result
    } catch {
        await client.shutdown()
        throw error
    }
}
