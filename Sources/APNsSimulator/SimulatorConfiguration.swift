import Foundation
import NIOCore

/// Everything the simulator is started with. Faults, devices, channels and the stream limit can also be
/// changed while it runs (``Simulator/faults``, ``Simulator/devices``, ``Simulator/channels``,
/// ``Simulator/setMaxConcurrentStreams(_:)``).
public struct SimulatorConfiguration: Sendable {
    /// Where the server's certificate and key come from.
    public enum TLSSource: Sendable {
        /// `DIR/server.pem` + `DIR/server-key.pem`; when missing, a CA is generated at `DIR/ca.pem`
        /// (+ `ca-key.pem`) and a server certificate for localhost / 127.0.0.1 / ::1 signed by it.
        case directory(String)
        /// A PEM certificate chain and its PEM private key.
        case files(certificateChain: String, privateKey: String)
    }

    public var host = "127.0.0.1"
    /// The push listener (device pushes and broadcasts); 0 picks a free port, ``Simulator/port``
    /// tells which.
    public var port = 0
    /// The channel-management listener, on the same host with the same TLS material and trust; 0 picks a
    /// free port, ``Simulator/managementPort`` tells which.
    public var managementPort = 0
    public var tls: TLSSource
    /// Production or development; development adds `apns-unique-id` to 200 answers.
    public var environment: SimulatorEnvironment = .production
    /// Provider token keys the simulator trusts (token-based trust); each may be restricted to one
    /// environment and name a related key.
    public var tokenKeys: [ProviderTokenKey] = []
    /// PEM of the CA that signs provider client certificates (certificate-based trust); `nil`: none.
    public var clientCertificateAuthorityPEM: String?
    /// Topics for a client certificate that has no 1.2.840.113635.100.6.3.6 extension.
    public var clientCertificateTopics: [String] = []
    /// With neither token keys nor a client CA, requests need no credentials when this is true;
    /// otherwise they get 403 MissingProviderToken.
    public var allowsUnauthenticated = false
    /// MAX_CONCURRENT_STREAMS once a connection is authorized (token connections start at 1).
    public var maxConcurrentStreams: UInt32 = 1000
    /// The per-connection token rule: a connection that changes its provider token less than this many
    /// seconds after it first used its current token gets 429 TooManyProviderTokenUpdates, and every
    /// later request on it gets the same until this many seconds have passed since. The first token of a
    /// connection is always taken. 0 switches the rule off. APNs: 20 minutes.
    public var tokenUpdateWindow: Double = 20 * 60
    /// The per-key token rule: at most this many distinct tokens of one key (by key id) first taken
    /// within ``tokensPerKeyWindow``, over all connections; a request bringing one more gets 429
    /// TooManyProviderTokenUpdates (that request only). `nil` or 0 switches the rule off. Default 2: the
    /// newest token and the one before it, still on the connections that started with it.
    public var tokensPerKey: Int? = 2
    /// The window of the per-key rule, in seconds; also the window of
    /// ``ProviderTokenUsage/mostInWindow``, whether the rule is on or off.
    public var tokensPerKeyWindow: Double = 20 * 60
    /// Close a connection idle this long, with GOAWAY `IdleTimeout`; `nil`: never.
    public var idleTimeout: Duration?
    /// Lowercase is the canonical `apns-id`; set to also take uppercase hex digits.
    public var acceptsUppercaseMessageID = false
    public var unknownDevices: DeviceRegistry.UnknownDevicePolicy = .reject
    /// Known device tokens at start.
    public var devices: [String: DeviceRegistry.Device] = [:]
    /// Unregistered device tokens at start, with the time (seconds since 1970) they went away.
    public var unregisteredDevices: [String: Double] = [:]
    /// Broadcast channels at start.
    public var channels: [ChannelRegistry.Preset] = []
    /// Apps (bundle IDs) without the broadcast capability: broadcasts and channel management for them
    /// get 400 FeatureNotEnabled.
    public var broadcastDisabledBundleIDs: Set<String> = []
    /// Channels one app may have; a create beyond it is 400 CannotCreateChannelConfig.
    public var channelLimit = ChannelRegistry.defaultLimit
    /// Accepted notifications (and, separately, broadcasts) kept for ``SimulatorObservation/records``; 0 records nothing.
    public var recordLimit = 10_000
    /// Distinct `apns-id`s whose acceptances are counted, to tell a device push accepted twice
    /// (``SimulatorObservation/repeatedAcceptances``); at most about 100 bytes each. 0 counts none.
    public var apnsIDLimit = 100_000
    /// Event loop threads serving connections.
    public var threads = System.coreCount
    public var clock: any SimulatorClock = SystemSimulatorClock()
    /// Seed for rate-based faults and latency draws.
    public var faultSeed: UInt64 = 0x5EED

    public init(tls: TLSSource) {
        self.tls = tls
    }
}

/// A configuration the simulator cannot start with.
public struct APNsSimulatorConfigurationError: Error, CustomStringConvertible {
    public var description: String
}
