import NIOCore

/// Bounds the time a connection of the operations endpoint may take, first in its pipeline so that
/// it sees the bytes as they come:
///
/// - a request must arrive whole within `requestTimeout` of its first byte (of the connection's
///   start, for the first request), however slowly its bytes trickle in;
/// - between requests, a kept-alive connection may send nothing for `idleTimeout`.
///
/// A connection past its deadline is closed. The HTTP handler reports a request received whole and
/// a response sent as outbound user events (`Event`); the tracker hears of each change of phase.
final class RequestDeadlineHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What `OperationsHTTPHandler` reports, as an outbound user event.
    enum Event {
        case requestReceived
        case responseSent(keepAlive: Bool)
    }

    private enum State {
        /// Waiting for a request (or the rest of one) until the deadline.
        case receiving
        /// Kept alive between requests: the next one's first byte starts its deadline.
        case idle
        case answering
    }

    private let requestTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private let tracker: ConnectionTracker
    private var state = State.receiving
    private var timer: Scheduled<Void>?
    /// Bytes of a next request came while one was answered (HTTP/1.1 pipelining): its deadline is the
    /// request time once the answer is out, not the idle time.
    private var readWhileAnswering = false

    init(requestTimeout: TimeAmount, idleTimeout: TimeAmount, tracker: ConnectionTracker) {
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.tracker = tracker
    }

    func handlerAdded(context: ChannelHandlerContext) {
        arm(requestTimeout, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .idle:
            state = .receiving
            arm(requestTimeout, context: context)
        case .answering:
            readWhileAnswering = true
        case .receiving:
            break
        }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? Event else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch event {
        case .requestReceived:
            state = .answering
            timer?.cancel()
            tracker.update(context.channel, to: .answering)
        case .responseSent(let keepAlive):
            guard keepAlive else { break }
            if readWhileAnswering {
                readWhileAnswering = false
                state = .receiving
                arm(requestTimeout, context: context)
            } else {
                state = .idle
                arm(idleTimeout, context: context)
            }
            tracker.update(context.channel, to: .idle)
        }
        promise?.succeed()
    }

    private func arm(_ timeout: TimeAmount, context: ChannelHandlerContext) {
        timer?.cancel()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }
}
