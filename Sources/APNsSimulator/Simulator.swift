import Synchronization
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// An APNs look-alike HTTP/2 server: TLS with ALPN h2, Apple's request rules and reasons, token and
/// certificate trust, a device registry, broadcast channels, fault injection and observation. Start it,
/// point a client at ``host``:``port`` (device pushes and broadcasts) and ``host``:``managementPort``
/// (channel management) trusting ``certificateAuthorityPath``, and shut it down when done.
public final class Simulator: Sendable {
    /// Devices known to the simulated APNs; change them at any time.
    public var devices: DeviceRegistry { core.devices }
    /// Broadcast channels and which apps may broadcast; change them at any time.
    public var channels: ChannelRegistry { core.channels }
    /// The channels made at start from ``SimulatorConfiguration/channels``, in its order (with the
    /// ids made up for presets that had none).
    public var presetChannels: [ChannelRegistry.Channel] { core.presetChannels }
    /// Faults; change them at any time.
    public var faults: FaultInjector { core.faults }
    /// Accepted notifications, counters, live connections and streams.
    public var observation: SimulatorObservation { core.observation }
    public let configuration: SimulatorConfiguration
    /// The address actually bound.
    public let host: String
    /// The push listener's port: device pushes and broadcasts.
    public let port: Int
    /// The channel-management listener's port (same host, TLS material and trust).
    public let managementPort: Int
    /// The CA certificate to trust, when the simulator generated it (`TLSSource.directory`).
    public let certificateAuthorityPath: String?

    private let core: SimulatorCore
    private let group: MultiThreadedEventLoopGroup
    private let serverChannel: any Channel
    private let managementChannel: any Channel
    private let stopped = Synchronization.Atomic(false)

    /// Binds and starts serving. Throws when the TLS material cannot be read or the port is taken.
    public static func start(_ configuration: SimulatorConfiguration) async throws -> Simulator {
        let core = try SimulatorCore(configuration: configuration)
        let material = try TLSMaterial.load(configuration.tls)
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: material.certificateChain.map { .certificate($0) },
            privateKey: .privateKey(material.privateKey)
        )
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        if core.clientAuthority != nil {
            // Certificates are optional (token clients have none); the connection judges them itself
            // so a bad one can be answered 403 BadCertificate as APNs does.
            tls.certificateVerification = .optionalVerification
        }
        let context = try NIOSSLContext(configuration: tls)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.threads))
        var bound: [any Channel] = []
        do {
            for (listener, port) in [
                (APNsConnectionHandler.Listener.push, configuration.port), (.management, configuration.managementPort),
            ] {
                let channel = try await ServerBootstrap(group: group)
                    .serverChannelOption(.backlog, value: 1024)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                    .childChannelOption(.maxMessagesPerRead, value: 16)
                    .childChannelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try Self.configure(channel, context: context, core: core, listener: listener)
                        }
                    }
                    .bind(host: configuration.host, port: port)
                    .get()
                bound.append(channel)
            }
            return Simulator(
                configuration: configuration,
                core: core,
                group: group,
                channel: bound[0],
                managementChannel: bound[1],
                authorityPath: material.authorityPath
            )
        } catch {
            for channel in bound { try? await channel.close() }
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private init(
        configuration: SimulatorConfiguration,
        core: SimulatorCore,
        group: MultiThreadedEventLoopGroup,
        channel: any Channel,
        managementChannel: any Channel,
        authorityPath: String?
    ) {
        self.configuration = configuration
        self.core = core
        self.group = group
        self.serverChannel = channel
        self.managementChannel = managementChannel
        self.host = channel.localAddress?.ipAddress ?? configuration.host
        self.port = channel.localAddress?.port ?? configuration.port
        self.managementPort = managementChannel.localAddress?.port ?? configuration.managementPort
        self.certificateAuthorityPath = authorityPath
    }

    /// Stops listening (both listeners), closes every connection and stops the event loops. Once: a
    /// second call returns at once (the loops it would schedule on are gone).
    public func shutdown() async throws {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        try? await serverChannel.close()
        try? await managementChannel.close()
        core.forEachConnection { $0.run { $0.closeAbruptly() } }
        try await group.shutdownGracefully()
    }

    /// Sends GOAWAY with `{"reason": …}` on every live connection (both listeners); each finishes the streams it has
    /// already received (up to its last-stream-id), then closes.
    public func goAway(reason: SimulatorReason = .shutdown) {
        core.forEachConnection { $0.run { $0.goAway(reason: reason) } }
    }

    /// Drops every live connection without GOAWAY.
    public func closeAllConnections() {
        core.forEachConnection { $0.run { $0.closeAbruptly() } }
    }

    /// Every live connection (both listeners) with what it has accepted and what it still owes an
    /// answer, each read on its connection's event loop: which connections a client had open, and how
    /// many of its pushes the simulator had taken without answering when it went away.
    public func connections() async -> [ConnectionSnapshot] {
        await core.connectionSnapshots()
    }

    /// Changes SETTINGS_MAX_CONCURRENT_STREAMS on every authorized connection and for new ones.
    public func setMaxConcurrentStreams(_ value: UInt32) {
        core.setMaxConcurrentStreams(value)
    }

    /// Builds the pipeline of one accepted connection: TLS, then (after the handshake, once the
    /// client certificate is known) HTTP/2 and the APNs handler of its listener.
    private static func configure(
        _ channel: any Channel, context: NIOSSLContext, core: SimulatorCore, listener: APNsConnectionHandler.Listener
    ) throws {
        let box = NIOLoopBoundBox<ClientCertificateIdentity?>(nil, eventLoop: channel.eventLoop)
        let tlsHandler: NIOSSLServerHandler
        if let authority = core.clientAuthority {
            let environment = core.configuration.environment
            let topics = core.configuration.clientCertificateTopics
            tlsHandler = NIOSSLServerHandler(context: context) { certificates, promise in
                if let leaf = certificates.first, let der = try? leaf.toDERBytes() {
                    box.value = ClientCertificateIdentity.read(
                        leafDER: der,
                        authority: authority,
                        environment: environment,
                        configuredTopics: topics,
                        now: Date()
                    )
                }
                promise.succeed(.certificateVerified)
            }
        } else {
            tlsHandler = NIOSSLServerHandler(context: context)
        }
        try channel.pipeline.syncOperations.addHandler(tlsHandler)
        try channel.pipeline.syncOperations.addHandler(
            HandshakeHandler(core: core, certificate: box, listener: listener))
    }
}

/// Waits for the TLS handshake, then installs HTTP/2 with the stream limit the connection's trust
/// calls for (one stream for token trust, the configured value for a certificate).
private final class HandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let core: SimulatorCore
    private let certificate: NIOLoopBoundBox<ClientCertificateIdentity?>
    private let listener: APNsConnectionHandler.Listener

    init(
        core: SimulatorCore, certificate: NIOLoopBoundBox<ClientCertificateIdentity?>,
        listener: APNsConnectionHandler.Listener
    ) {
        self.core = core
        self.certificate = certificate
        self.listener = listener
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case TLSUserEvent.handshakeCompleted(let negotiated) = event else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        // Only h2 is offered; a client that offered something else gets no ALPN and then fails the
        // HTTP/2 preface check. A client that offered nothing is taken as HTTP/2 with prior knowledge.
        guard negotiated == nil || negotiated == "h2" else {
            context.close(promise: nil)
            return
        }
        let handler = APNsConnectionHandler(core: core, certificate: certificate.value, listener: listener)
        let settings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: Int(handler.initialMaxConcurrentStreams)),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
        ]
        do {
            let sync = context.pipeline.syncOperations
            let coalescer = OutboundCoalescingHandler()
            let literals = HuffmanLiteralCacheHandler(allocator: context.channel.allocator)
            try sync.addHandler(coalescer, position: .after(self))
            try sync.addHandler(literals, position: .after(coalescer))
            try sync.addHandler(
                NIOHTTP2Handler(
                    mode: .server, initialSettings: settings, headerBlockValidation: .disabled,
                    contentLengthValidation: .disabled),
                position: .after(literals)
            )
            try sync.addHandler(handler, position: .last)
            sync.removeHandler(context: context, promise: nil)
        } catch {
            context.close(promise: nil)
        }
    }
}
