import NIOCore

/// Opens an HTTP `CONNECT` tunnel through a proxy before anything else talks: it sits next to the
/// socket, holds back `channelActive` (so TLS does not start) and every outbound write until the
/// proxy answers with any 2xx status, then lets both through and leaves the pipeline. Any other answer, a closed
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
        // The status line is the bytes up to the first CRLF (a String's Characters would merge
        // "\r\n" into one and never stop at "\r").
        let lineEnd = view.firstRange(of: [13, 10])!.lowerBound
        let statusLine = Array(view[view.startIndex..<lineEnd])
        let headerLength = view.distance(from: view.startIndex, to: end.upperBound)
        answer!.moveReaderIndex(forwardBy: headerLength)
        guard let status = Self.status(of: statusLine), (200..<300).contains(status) else {
            fail(
                context: context,
                "the proxy \(proxy.host):\(proxy.port) refused CONNECT \(target): \(Self.quoted(statusLine))")
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

    /// The status code of an `HTTP/1.x NNN [reason]` status line, or nil when it is not one.
    static func status(of line: [UInt8]) -> Int? {
        let prefix = Array("HTTP/1.".utf8)
        guard line.count >= prefix.count + 5, line.starts(with: prefix),
            (0x30...0x39).contains(line[prefix.count]), line[prefix.count + 1] == 0x20
        else {
            return nil
        }
        let digits = line[(prefix.count + 2)...].prefix(3)
        guard digits.count == 3, digits.allSatisfy({ (0x30...0x39).contains($0) }),
            line.count == prefix.count + 5 || line[prefix.count + 5] == 0x20
        else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    /// What the proxy said, fit for an error and a log line: its first 80 bytes, control characters
    /// and anything not ASCII shown as "?".
    static func quoted(_ line: [UInt8]) -> String {
        let shown = line.prefix(80).map { (0x20..<0x7F).contains($0) ? Character(UnicodeScalar($0)) : "?" }
        return String(shown) + (line.count > 80 ? "…" : "")
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
