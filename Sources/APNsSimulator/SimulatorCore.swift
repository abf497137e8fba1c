import Synchronization
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import X509

/// What every connection of both listeners shares: the fixed configuration, the token verifier, the
/// device and channel registries, the fault settings, the observation, and the table of live connections
/// for run-time control.
final class SimulatorCore: Sendable {
    let configuration: SimulatorConfiguration
    let verifier: ProviderTokenVerifier
    let clientAuthority: Certificate?
    let devices: DeviceRegistry
    let channels: ChannelRegistry
    /// The channels made from ``SimulatorConfiguration/channels``, in its order.
    let presetChannels: [ChannelRegistry.Channel]
    let faults: FaultInjector
    let observation: SimulatorObservation
    /// The provider tokens of all connections: the per-key rule and its counts.
    let tokenLedger: ProviderTokenLedger
    let clock: any SimulatorClock
    private let maxStreams: Synchronization.Atomic<UInt32>
    private let nextConnectionID = Synchronization.Atomic<Int>(1)
    private let connections = NIOLockedValueBox<[Int: ConnectionControl]>([:])

    init(configuration: SimulatorConfiguration) throws {
        self.configuration = configuration
        self.verifier = ProviderTokenVerifier(keys: configuration.tokenKeys, environment: configuration.environment)
        self.clientAuthority = try configuration.clientCertificateAuthorityPEM.map { try Certificate(pemEncoded: $0) }
        self.devices = DeviceRegistry(policy: configuration.unknownDevices)
        for (token, device) in configuration.devices {
            devices.register(token, topic: device.topic, environment: device.environment)
        }
        for (token, since) in configuration.unregisteredDevices { devices.unregister(token, at: since) }
        let channels = ChannelRegistry(
            limit: configuration.channelLimit, broadcastDisabled: configuration.broadcastDisabledBundleIDs)
        var presetChannels: [ChannelRegistry.Channel] = []
        for preset in configuration.channels {
            do {
                presetChannels.append(
                    try channels.create(bundleID: preset.bundleID, storagePolicy: preset.storagePolicy, id: preset.id))
            } catch {
                throw APNsSimulatorConfigurationError(
                    description:
                        "channel \(preset.id ?? "(new)") of \(preset.bundleID) cannot be created: \(error.rawValue)")
            }
        }
        self.channels = channels
        self.presetChannels = presetChannels
        self.faults = FaultInjector(seed: configuration.faultSeed)
        self.tokenLedger = ProviderTokenLedger(
            limit: configuration.tokensPerKey, window: configuration.tokensPerKeyWindow, clock: configuration.clock)
        self.observation = SimulatorObservation(
            recordLimit: configuration.recordLimit, apnsIDLimit: configuration.apnsIDLimit, tokenLedger: tokenLedger)
        self.clock = configuration.clock
        self.maxStreams = Synchronization.Atomic(configuration.maxConcurrentStreams)
    }

    var maxConcurrentStreams: UInt32 { maxStreams.load(ordering: .relaxed) }

    /// How a new connection authenticates, given what its TLS handshake showed.
    func authMode(certificate: ClientCertificateIdentity?) -> ConnectionAuthStateMachine.Mode {
        if let certificate { return .certificate(certificate) }
        if verifier.isEmpty && configuration.allowsUnauthenticated { return .open }
        return .token
    }

    // MARK: live connections

    func register(_ control: ConnectionControl) -> Int {
        let id = nextConnectionID.wrappingAdd(1, ordering: .relaxed).oldValue
        connections.withLockedValue { $0[id] = control }
        return id
    }

    func unregister(_ id: Int) {
        _ = connections.withLockedValue { $0.removeValue(forKey: id) }
    }

    /// Every live connection's counts, each read on its own event loop.
    func connectionSnapshots() async -> [ConnectionSnapshot] {
        let all = connections.withLockedValue { Array($0.values) }
        var snapshots: [ConnectionSnapshot] = []
        for control in all {
            // A loop already shut down (the simulator stopping) has nothing left to tell.
            if let snapshot = try? await control.read({ $0.snapshot }) { snapshots.append(snapshot) }
        }
        return snapshots.sorted { $0.id < $1.id }
    }

    func forEachConnection(_ body: (ConnectionControl) -> Void) {
        let all = connections.withLockedValue { Array($0.values) }
        all.forEach(body)
    }

    func setMaxConcurrentStreams(_ value: UInt32) {
        maxStreams.store(value, ordering: .relaxed)
        forEachConnection { $0.run { $0.applyMaxConcurrentStreams(value) } }
    }
}

/// A handle on one live connection, usable from any thread: work is hopped onto its event loop.
struct ConnectionControl: Sendable {
    let handler: NIOLoopBound<APNsConnectionHandler>

    func run(_ body: @escaping @Sendable (APNsConnectionHandler) -> Void) {
        let handler = self.handler
        handler.eventLoop.execute { body(handler.value) }
    }

    func read<Value: Sendable>(_ body: @escaping @Sendable (APNsConnectionHandler) -> Value) async throws -> Value {
        let handler = self.handler
        return try await handler.eventLoop.submit { body(handler.value) }.get()
    }
}
