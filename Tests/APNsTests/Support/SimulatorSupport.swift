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

/// A simulator of `Simulator.startForTests` (its PKI made here, a client CA when `clientCA`) for
/// `body`, shut down after it however it ends.
func withTestSimulator<T>(
    clientCA: Bool = false, configure: (inout SimulatorConfiguration) -> Void = { _ in },
    _ body: (Simulator, TestPKI) async throws -> T
) async throws -> T {
    let pki = try TestPKI()
    let caPEM = clientCA ? String(decoding: try pki.bytes(pki.caCertificate), as: UTF8.self) : nil
    let simulator = try await Simulator.startForTests(pki: pki, clientCAPEM: caPEM, configure: configure)
    do {
        let result = try await body(simulator, pki)
        try await simulator.shutdown()
        return result
    } catch {
        try? await simulator.shutdown()
        throw error
    }
}
