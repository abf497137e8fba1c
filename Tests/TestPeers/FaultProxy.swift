import NIOCore
import NIOPosix

/// A TCP proxy on loopback that tests put between a client and a server to break the network
/// on purpose: added latency, connections cut with a reset, a black hole (bytes stop, nothing
/// closes), a partition healed after a while, or the server made unreachable. Every byte that
/// passes, passes untouched (a Kafka broker's answers too: no client the tests run needs them
/// changed).
///
/// Everything runs on one event loop thread of its own: the proxy copies no byte it does not have
/// to and keeps its state confined to that thread.
package final class FaultProxy: @unchecked Sendable {
    package enum Framing: Sendable, Equatable {
        /// Bytes pass as they come.
        case raw
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
    package static func start(
        upstreamHost: String = "127.0.0.1", upstreamPort: Int, framing: Framing = .raw, port: Int = 0
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

/// One client connection and its upstream connection. Confined to the proxy's loop (hence unchecked).
final class ProxyPair: @unchecked Sendable {
    enum Direction { case up, down }

    unowned let proxy: FaultProxy
    let downstream: any Channel
    var upstream: (any Channel)?
    var connecting = false
    var closed = false
    /// When the last delayed write each way is due, so a shorter latency never reorders bytes.
    var lastDue: [Direction: NIODeadline] = [:]

    init(proxy: FaultProxy, downstream: any Channel) {
        self.proxy = proxy
        self.downstream = downstream
    }

    func handlers(for direction: Direction) -> [any ChannelHandler] {
        [ForwardHandler(pair: self, direction: direction)]
    }

    func connectUpstream(then opened: (@Sendable (any Channel) -> Void)? = nil) {
        connecting = true
        proxy.makeUpstreamBootstrap(for: self)
            .connect(host: proxy.upstreamHost, port: proxy.upstreamPort)
            .whenComplete { result in
                self.connecting = false
                switch result {
                case .success(let channel):
                    if self.closed {
                        channel.close(promise: nil)
                        return
                    }
                    self.upstream = channel
                    opened?(channel)
                    self.updateReading()
                case .failure:
                    self.reset()
                }
            }
    }

    /// Reads both ways unless black-holed, and only while the other side can take more.
    func updateReading() {
        guard let upstream, !closed else { return }
        let flowing = !proxy.blackHoled
        _ = downstream.setOption(ChannelOptions.autoRead, value: flowing && upstream.isWritable)
        _ = upstream.setOption(ChannelOptions.autoRead, value: flowing && downstream.isWritable)
    }

    func forward(_ data: ByteBuffer, _ direction: Direction) {
        guard let target = direction == .up ? upstream : downstream else { return }
        switch direction {
        case .up: proxy.statistics.bytesUp += data.readableBytes
        case .down: proxy.statistics.bytesDown += data.readableBytes
        }
        later(direction) { target.writeAndFlush(data, promise: nil) }
    }

    /// Runs `action` after the proxy's latency, in order with earlier actions the same way.
    func later(_ direction: Direction, _ action: @escaping @Sendable () -> Void) {
        let latency = proxy.latency
        guard latency > .zero || lastDue[direction] != nil else {
            action()
            return
        }
        let due = max(NIODeadline.now() + latency, lastDue[direction] ?? .uptimeNanoseconds(0))
        lastDue[direction] = due
        proxy.loop.scheduleTask(deadline: due) {
            if self.lastDue[direction] == due { self.lastDue[direction] = nil }
            action()
        }
    }

    /// The channel that reads the bytes going `direction` closed: close the other one once what it
    /// was sent has gone through.
    func channelClosed(reading direction: Direction) {
        guard !closed else { return }
        closed = true
        proxy.removed(self)
        let other = direction == .up ? upstream : downstream
        later(direction) { other?.close(promise: nil) }
    }

    func close() {
        closed = true
        downstream.close(promise: nil)
        upstream?.close(promise: nil)
        proxy.removed(self)
    }

    func reset() {
        closed = true
        Self.reset(downstream)
        if let upstream { Self.reset(upstream) }
        proxy.removed(self)
    }

    /// Closes with SO_LINGER 0: the kernel sends RST instead of FIN.
    static func reset(_ channel: any Channel) {
        guard let options = channel as? any SocketOptionProvider else {
            channel.close(promise: nil)
            return
        }
        options.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// Unchecked: it lives in a pipeline on the proxy's one loop, as does the pair it forwards to.
final class ForwardHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    let pair: ProxyPair
    /// The way bytes read on this handler's channel go.
    let direction: ProxyPair.Direction

    init(pair: ProxyPair, direction: ProxyPair.Direction) {
        self.pair = pair
        self.direction = direction
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        pair.forward(unwrapInboundIn(data), direction)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        pair.updateReading()
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        pair.channelClosed(reading: direction)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// `.httpConnect`: reads the client's CONNECT request head, answers it with the scripted bytes,
/// then opens the tunnel (a 2xx answer) or closes. Unchecked: confined to the proxy's loop.
final class ConnectAnswerHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    let pair: ProxyPair
    let answer: String
    private var head: ByteBuffer?

    init(pair: ProxyPair, answer: String) {
        self.pair = pair
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var chunk = unwrapInboundIn(data)
        if head == nil { head = chunk } else { head!.writeBuffer(&chunk) }
        guard var head, let end = head.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else { return }
        self.head = nil
        let length = head.readableBytesView.distance(from: head.readableBytesView.startIndex, to: end.upperBound)
        let request = head.readString(length: length) ?? ""
        // Split on the string: "\r\n" is one Character, so no Character equals "\r".
        pair.proxy.statistics.connectRequests.append(request.components(separatedBy: "\r\n")[0])
        let rest = head
        let channel = context.channel
        let answer = channel.allocator.buffer(string: self.answer)
        let accepted = self.answer.split(separator: " ", maxSplits: 2).dropFirst().first?.hasPrefix("2") ?? false
        _ = channel.setOption(ChannelOptions.autoRead, value: false)
        guard accepted else {
            channel.writeAndFlush(answer).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        let pair = self.pair
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        pair.connectUpstream { upstream in
            channel.writeAndFlush(answer, promise: nil)
            if rest.readableBytes > 0 { upstream.writeAndFlush(rest, promise: nil) }
        }
    }
}
