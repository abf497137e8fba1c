import NIOCore

/// Opens an HTTP `CONNECT` tunnel through a proxy before anything else talks: it sits next to the
/// socket, holds back `channelActive` (so TLS does not start) and every outbound write until the
/// proxy answers 200, then lets both through and leaves the pipeline. Any other answer, a closed
/// connection or no answer within `timeout` becomes an `APNsClientError` (`connectFailed`, nothing
/// reached APNs) that closes the channel. Runs on its channel's event loop only.
final class HTTPConnectHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case waitingForActive, waitingForAnswer, established, failed
    }

    private let target: String
    private let proxy: APNsProxy
    private let timeout: TimeAmount
    private var state = State.waitingForActive
    private var answer: ByteBuffer?
    private var heldWrites: [(NIOAny, EventLoopPromise<Void>?)] = []
    private var timer: Scheduled<Void>?
    /// Its place in the pipeline while it is in one (for the timer).
    private var context: ChannelHandlerContext?
    /// The proxy's answer header may not be longer than this.
    private static let maximumAnswerBytes = 16 * 1024

    /// - Parameter target: `host:port` of the APNs server to reach through `proxy`.
    init(target host: String, port: Int, proxy: APNsProxy, timeout: TimeAmount) {
        self.target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        self.proxy = proxy
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { sendConnect(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        timer?.cancel()
    }

    func channelActive(context: ChannelHandlerContext) {
        sendConnect(context: context)  // the handlers behind see channelActive once the tunnel is up
    }

    private func sendConnect(context: ChannelHandlerContext) {
        guard state == .waitingForActive else { return }
        state = .waitingForAnswer
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization = proxy.authorization { request += "Proxy-Authorization: \(authorization)\r\n" }
        request += "\r\n"
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: request)), promise: nil)
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self] in
            guard let self, self.state == .waitingForAnswer, let context = self.context else { return }
            self.fail(
                context: context, "the proxy \(self.proxy.host):\(self.proxy.port) did not answer CONNECT in time")
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state == .waitingForAnswer else {
            if state == .established { context.fireChannelRead(data) }
            return
        }
        var chunk = unwrapInboundIn(data)
        if answer == nil { answer = chunk } else { answer!.writeBuffer(&chunk) }
        guard let view = answer?.readableBytesView,
            let end = view.firstRange(of: [13, 10, 13, 10])  // "\r\n\r\n": the header is complete
        else {
            if (answer?.readableBytes ?? 0) > Self.maximumAnswerBytes {
                fail(context: context, "the proxy's answer to CONNECT has no end")
            }
            return
        }
        let headerLength = view.distance(from: view.startIndex, to: end.upperBound)
        let header = answer!.readString(length: headerLength) ?? ""
        let statusLine = header.prefix { $0 != "\r" }
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1] == "200" else {
            fail(context: context, "the proxy \(proxy.host):\(proxy.port) refused CONNECT \(target): \(statusLine)")
            return
        }
        state = .established
        timer?.cancel()
        let rest = answer!
        answer = nil
        context.fireChannelActive()
        for (data, promise) in heldWrites { context.write(data, promise: promise) }
        heldWrites = []
        context.flush()
        if rest.readableBytes > 0 { context.fireChannelRead(NIOAny(rest)) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch state {
        case .established: context.write(data, promise: promise)
        case .failed: promise?.fail(ChannelError.ioOnClosedChannel)
        case .waitingForActive, .waitingForAnswer: heldWrites.append((data, promise))
        }
    }

    func flush(context: ChannelHandlerContext) {
        if state == .established { context.flush() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if state == .waitingForAnswer {
            fail(
                context: context, "the proxy \(proxy.host):\(proxy.port) closed the connection before answering CONNECT"
            )
        }
        context.fireChannelInactive()
    }

    private func fail(context: ChannelHandlerContext, _ message: String) {
        guard state != .failed else { return }
        state = .failed
        timer?.cancel()
        for (_, promise) in heldWrites { promise?.fail(ChannelError.ioOnClosedChannel) }
        heldWrites = []
        context.fireErrorCaught(APNsClientError(.connectFailed, message, mayHaveReachedAPNs: false))
        context.close(promise: nil)
    }
}
