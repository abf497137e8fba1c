import NIOCore
import NIOPosix
import NIOSSL

/// A TCP proxy on loopback that tests put between a client and a server to break the network
/// on purpose: added latency, connections cut with a reset, a black hole (bytes stop, nothing
/// closes), a partition healed after a while, or the server made unreachable. Every byte that
/// passes, passes untouched (a Kafka broker's answers too: no client the tests run needs them
/// changed). It can also stand for a broker's security (`ProxySecurity`, with `.kafka` framing):
/// TLS and mutual TLS, terminated here, and SASL/PLAIN, answered here, in front of a broker that
/// speaks plain TCP.
///
/// Everything runs on one event loop thread of its own: the proxy copies no byte it does not have
/// to and keeps its state confined to that thread.
package final class FaultProxy: @unchecked Sendable {
    package enum Framing: Sendable, Equatable {
        /// Bytes pass as they come.
        case raw
        /// Kafka frames, for the security the proxy stands for (`ProxySecurity`): SASL requests are
        /// answered here and the ApiVersions answer gains the SASL keys. Without SASL, every frame
        /// passes as it came.
        case kafka
        /// An HTTP CONNECT proxy that answers every CONNECT with these exact bytes, then (for a 2xx
        /// answer) tunnels to the upstream, else closes: for clients that must read any answer a
        /// proxy may give.
        case httpConnect(answer: String)
    }

    /// Counters, read on the proxy's thread.
    package struct Statistics: Sendable, Equatable {
        package var accepted = 0
        package var open = 0
        package var cut = 0
        package var bytesUp = 0
        package var bytesDown = 0
        /// The request lines of the CONNECTs answered (`.httpConnect`).
        package var connectRequests: [String] = []
        /// TLS handshakes completed and failed (with the failures), and plain clients reset.
        package var tlsAccepted = 0
        package var tlsRefused = 0
        package var tlsErrors: [String] = []
        package var plainRefused = 0
        /// SASL authentications that succeeded and failed.
        package var saslAuthenticated = 0
        package var saslRefused = 0
    }

    package let port: Int
    package var address: String { "127.0.0.1:\(port)" }

    private let group: MultiThreadedEventLoopGroup
    let loop: any EventLoop
    let framing: Framing
    private let server: any Channel

    // Confined to `loop`.
    var upstreamPort: Int
    let upstreamHost: String
    var latency: TimeAmount = .zero
    var blackHoled = false
    var refusing = false
    var security: ProxySecurity?
    var tlsContext: NIOSSLContext?
    var pairs: [ObjectIdentifier: ProxyPair] = [:]
    var statistics = Statistics()

    private init(
        group: MultiThreadedEventLoopGroup, server: any Channel, framing: Framing, upstreamHost: String,
        upstreamPort: Int
    ) {
        self.group = group
        self.loop = server.eventLoop
        self.server = server
        self.port = server.localAddress?.port ?? 0
        self.framing = framing
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
    }

    /// Listens on `127.0.0.1:port` (0: a free port below the ephemeral range, see
    /// `freeLoopbackPort`) and forwards each connection to the upstream.
    /// `security` (Kafka framing only) is what clients must present; see `setSecurity`.
    package static func start(
        upstreamHost: String = "127.0.0.1", upstreamPort: Int, framing: Framing = .raw, port: Int = 0,
        security: ProxySecurity? = nil
    ) async throws -> FaultProxy {
        precondition(security == nil || framing == .kafka, "TLS and SASL are for Kafka framing")
        let proxy = try await start(
            upstreamHost: upstreamHost, upstreamPort: upstreamPort, framing: framing, port: port)
        if let security {
            do {
                try await proxy.setSecurity(security)
            } catch {
                await proxy.shutdown()
                throw error
            }
        }
        return proxy
    }

    private static func start(
        upstreamHost: String, upstreamPort: Int, framing: Framing, port: Int
    ) async throws -> FaultProxy {
        guard port == 0 else {
            return try await start(upstreamHost: upstreamHost, upstreamPort: upstreamPort, framing: framing, on: port)
        }
        var lastError: (any Error)?
        // A port found free can be taken before the bind: try another.
        for _ in 0..<5 {
            do {
                return try await start(
                    upstreamHost: upstreamHost, upstreamPort: upstreamPort, framing: framing, on: try freeLoopbackPort()
                )
            } catch {
                lastError = error
            }
        }
        throw lastError!
    }

    private static func start(
        upstreamHost: String, upstreamPort: Int, framing: Framing, on port: Int
    ) async throws -> FaultProxy {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let box = ProxyBox()
        do {
            let server = try await ServerBootstrap(group: group)
                .childChannelOption(ChannelOptions.autoRead, value: false)
                .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        guard let proxy = box.proxy else { throw ChannelError.ioOnClosedChannel }
                        proxy.accept(channel)
                    }
                }
                .bind(host: "127.0.0.1", port: port).get()
            let proxy = FaultProxy(
                group: group, server: server, framing: framing, upstreamHost: upstreamHost, upstreamPort: upstreamPort)
            box.proxy = proxy
            return proxy
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    // MARK: Faults

    /// Where new connections go (a broker started after its proxy learns its port here).
    package func setUpstream(port: Int) async {
        await onLoop { $0.upstreamPort = port }
    }

    /// What new connections must present (nil: nothing, plain TCP); open connections keep what they
    /// had. A test swaps the server certificate or the CA here to break TLS, or to heal it.
    package func setSecurity(_ security: ProxySecurity?) async throws {
        let context = try security?.makeContext()
        await onLoop { proxy in
            proxy.security = security
            proxy.tlsContext = context
        }
    }

    /// Every byte, both ways, arrives this much later (order kept).
    package func setLatency(_ latency: Duration) async {
        let (seconds, attoseconds) = latency.components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        await onLoop { $0.latency = .nanoseconds(nanoseconds) }
    }

    /// Resets every open connection, both sides (the peers see ECONNRESET).
    package func cutConnections() async {
        await onLoop { $0.cutAll() }
    }

    /// As a server that shuts down: every open connection closed, both sides, with a FIN, and new
    /// ones refused (reset at once), until set back.
    package func setClosing(_ on: Bool) async {
        await onLoop { proxy in
            proxy.refusing = on
            if on {
                for pair in proxy.pairs.values { pair.close() }
            }
        }
    }

    /// Bytes stop moving both ways and nothing closes; new connections are accepted and held.
    /// Healing lets everything held through, in order, as TCP would after a partition.
    package func setBlackHole(_ on: Bool) async {
        await onLoop { proxy in
            proxy.blackHoled = on
            for pair in proxy.pairs.values {
                if !on, !pair.connecting, pair.upstream == nil { pair.connectUpstream() }
                pair.updateReading()
            }
        }
    }

    /// A black hole for `duration`, then healed (the returned task ends when it is).
    @discardableResult
    package func partition(for duration: Duration) async -> Task<Void, Never> {
        await setBlackHole(true)
        return Task {
            try? await Task.sleep(for: duration)
            await self.setBlackHole(false)
        }
    }

    /// Unreachable: open connections are reset and new ones refused (reset at once), until set back.
    package func setUnreachable(_ on: Bool) async {
        await onLoop { proxy in
            proxy.refusing = on
            if on { proxy.cutAll() }
        }
    }

    package var currentStatistics: Statistics {
        get async { await onLoop { $0.statistics } }
    }

    package func shutdown() async {
        await onLoop { proxy in
            for pair in proxy.pairs.values { pair.close() }
        }
        try? await server.close()
        try? await group.shutdownGracefully()
    }

    @discardableResult
    private func onLoop<T: Sendable>(_ body: @escaping @Sendable (FaultProxy) -> T) async -> T {
        // The loop only goes away in `shutdown`, after which nobody calls in.
        try! await loop.submit { body(self) }.get()
    }

    // MARK: On the loop

    func accept(_ channel: any Channel) {
        loop.preconditionInEventLoop()
        statistics.accepted += 1
        if refusing {
            statistics.cut += 1
            ProxyPair.reset(channel)
            return
        }
        let pair = ProxyPair(proxy: self, downstream: channel)
        pairs[ObjectIdentifier(pair)] = pair
        statistics.open += 1
        try? channel.pipeline.syncOperations.addHandlers(pair.handlers(for: .up))
        if let security {
            if let tlsContext {
                try? channel.pipeline.syncOperations.addHandler(
                    TLSSniffHandler(pair: pair, context: tlsContext, admitsPlainClients: security.admitsPlainClients),
                    position: .first)
            }
            if let sasl = security.sasl {
                pair.saslGate = KafkaSASLGate(user: sasl, admitsPlainClients: security.admitsPlainClients)
            }
        }
        if case .httpConnect(let answer) = framing {
            // The tunnel opens once the CONNECT is read and answered.
            try? channel.pipeline.syncOperations.addHandler(
                ConnectAnswerHandler(pair: pair, answer: answer), position: .first)
            _ = channel.setOption(ChannelOptions.autoRead, value: true)
            return
        }
        if !blackHoled { pair.connectUpstream() }
    }

    func removed(_ pair: ProxyPair) {
        if pairs.removeValue(forKey: ObjectIdentifier(pair)) != nil { statistics.open -= 1 }
    }

    private func cutAll() {
        for pair in pairs.values {
            statistics.cut += 1
            pair.reset()
        }
    }

    func makeUpstreamBootstrap(for pair: ProxyPair) -> ClientBootstrap {
        ClientBootstrap(group: loop)
            .channelOption(ChannelOptions.autoRead, value: false)
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(pair.handlers(for: .down))
                }
            }
    }
}

private final class ProxyBox: @unchecked Sendable {
    // Written once before the server's first accept is served on the same loop.
    var proxy: FaultProxy?
}
