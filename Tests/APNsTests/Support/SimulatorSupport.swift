// The simulator's module has types named like the client's (APNsReason, APNsEnvironment) and a type
// named like itself, so its names are reached through these aliases from files that import the client.
import APNsSimulator
import Foundation

typealias Simulator = APNsSimulator
typealias SimulatorReason = APNsReason
typealias SimulatorConfiguration = APNsSimulatorConfiguration
typealias SimulatorTokenKey = ProviderTokenKey

extension APNsSimulator {
    /// A development-environment simulator on 127.0.0.1:0, trusting `tokenKeyPEM` for team
    /// TEAM123456 / key KEY1234567 and, when given, client certificates signed by `clientCAPEM`.
    static func startForTests(
        pki: TestPKI, clientCAPEM: String? = nil, configure: (inout APNsSimulatorConfiguration) -> Void = { _ in }
    ) async throws -> APNsSimulator {
        var configuration = APNsSimulatorConfiguration(
            tls: .files(certificateChain: pki.serverCertificate, privateKey: pki.serverKey))
        configuration.environment = .development
        configuration.threads = 1
        configuration.unknownDevices = .accept
        configuration.tokenKeys = [
            try ProviderTokenKey(
                teamID: "TEAM123456", keyID: "KEY1234567",
                pem: String(decoding: try pki.bytes(pki.tokenKey), as: UTF8.self))
        ]
        if let clientCAPEM {
            configuration.clientCertificateAuthorityPEM = clientCAPEM
            configuration.clientCertificateTopics = ["com.example.app"]
        }
        configure(&configuration)
        return try await APNsSimulator.start(configuration)
    }
}

extension SimulatorReason {
    static func named(_ name: String) -> SimulatorReason? { SimulatorReason(named: name) }
}

typealias SimulatorManualClock = ManualSimulatorClock
