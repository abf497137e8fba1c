import NIOCore
import NIOPosix

/// One client connection and its upstream connection. Confined to the proxy's loop (hence unchecked).
final class ProxyPair: @unchecked Sendable {
    enum Direction { case up, down }

    unowned let proxy: FaultProxy
    let downstream: any Channel
    var upstream: (any Channel)?
    var connecting = false
    var closed = false
    /// With SASL: the connection's exchange, and the ApiVersions answers to extend with its keys.
    var saslGate: KafkaSASLGate?
    var extendCorrelations: Set<Int32> = []
    /// When the last delayed write each way is due, so a shorter latency never reorders bytes.
    var lastDue: [Direction: NIODeadline] = [:]

    init(proxy: FaultProxy, downstream: any Channel) {
        self.proxy = proxy
        self.downstream = downstream
    }

    func handlers(for direction: Direction) -> [any ChannelHandler] {
        let forward = ForwardHandler(pair: self, direction: direction)
        switch proxy.framing {
        case .raw, .httpConnect: return [forward]
        case .kafka: return [ByteToMessageHandler(KafkaFrameDecoder()), forward]
        }
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
        guard (direction == .up ? upstream : downstream) != nil else { return }
        var data = data
        if proxy.framing == .kafka {
            switch direction {
            case .up:
                if saslGate != nil, !passSASL(data) { return }
            case .down:
                let id = KafkaWire.correlation(response: data)
                if let id, extendCorrelations.remove(id) != nil,
                    let extended = KafkaSASLWire.addingKeys(KafkaSASLWire.offeredVersions, to: data)
                {
                    data = extended
                }
            }
        }
        send(data, direction)
    }

    /// Whether a request goes on to the broker; answers or refuses it here if not.
    private func passSASL(_ request: ByteBuffer) -> Bool {
        guard var gate = saslGate else { return true }
        let action = gate.request(request)
        saslGate = gate
        switch action {
        case .forward:
            return true
        case .forwardExtendingAnswer(let correlation):
            extendCorrelations.insert(correlation)
            return true
        case .answer(let answer):
            if gate.state == .authenticated { proxy.statistics.saslAuthenticated += 1 }
            send(answer, .down)
            return false
        case .answerAndClose(let answer):
            proxy.statistics.saslRefused += 1
            send(answer, .down)
            closed = true
            proxy.removed(self)
            let (client, broker) = (downstream, upstream)
            later(.down) {
                client.close(promise: nil)
                broker?.close(promise: nil)
            }
            return false
        case .refuse:
            reset()
            return false
        }
    }

    /// Writes a frame (its size prefix first, with Kafka framing) to the side `direction` goes to.
    private func send(_ data: ByteBuffer, _ direction: Direction) {
        guard let target = direction == .up ? upstream : downstream else { return }
        switch direction {
        case .up: proxy.statistics.bytesUp += data.readableBytes
        case .down: proxy.statistics.bytesDown += data.readableBytes
        }
        let framing = proxy.framing
        let payload = data
        let write: @Sendable () -> Void = {
            let data = payload
            if framing == .kafka {
                var size = target.allocator.buffer(capacity: 4)
                size.writeInteger(Int32(data.readableBytes))
                target.write(size, promise: nil)
            }
            target.writeAndFlush(data, promise: nil)
        }
        later(direction, write)
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
