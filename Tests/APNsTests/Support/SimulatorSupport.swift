// Starting the APNs simulator for the client's tests.
import APNsSimulator
import Foundation

extension Simulator {
    /// A development-environment simulator on 127.0.0.1:0, trusting `tokenKeyPEM` for team
    /// TEAM123456 / key KEY1234567 and, when given, client certificates signed by `clientCAPEM`.
    static func startForTests(
        pki: TestPKI, clientCAPEM: String? = nil, configure: (inout SimulatorConfiguration) -> Void = { _ in }
    ) async throws -> Simulator {
        var configuration = SimulatorConfiguration(
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
        return try await Simulator.start(configuration)
    }
}
