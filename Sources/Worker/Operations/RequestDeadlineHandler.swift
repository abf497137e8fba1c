import NIOCore

/// Bounds the time a connection of the operations endpoint may take, first in its pipeline so that
/// it sees the bytes as they come:
///
/// - a request must arrive whole within `requestTimeout` of its first byte (of the connection's
///   start, for the first request), however slowly its bytes trickle in;
/// - an answer must be written whole within `requestTimeout` of its request (of the previous
///   answer, for pipelined requests), so that a client that does not read its answers is closed
///   instead of having them wait in memory;
/// - between requests, a kept-alive connection may send nothing for `idleTimeout`.
///
/// A connection past its deadline is closed. The HTTP handler reports a request received whole and
/// a response sent as outbound user events (`Event`); the tracker hears of each change of phase,
/// and of a client that stopped reading (the channel turned unwritable while answering).
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

    private let requestTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private let tracker: ConnectionTracker
    private var machine = StateMachine()
    private var timer: Scheduled<Void>?

    init(requestTimeout: TimeAmount, idleTimeout: TimeAmount, tracker: ConnectionTracker) {
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
        self.tracker = tracker
    }

    func handlerAdded(context: ChannelHandlerContext) {
        perform(StateMachine.Action(arm: .request), context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(machine.bytesRead(), context: context)
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        perform(machine.writabilityChanged(isWritable: context.channel.isWritable), context: context)
        context.fireChannelWritabilityChanged()
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let event = event as? Event else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch event {
        case .requestReceived:
            perform(machine.requestReceived(), context: context)
        case .responseSent(let keepAlive):
            // Not kept alive: the HTTP handler closes the connection.
            if keepAlive { perform(machine.responseSent(), context: context) }
        }
        promise?.succeed()
    }

    private func perform(_ action: StateMachine.Action, context: ChannelHandlerContext) {
        if let deadline = action.arm {
            timer?.cancel()
            let channel = context.channel
            let timeout = deadline == .idle ? idleTimeout : requestTimeout
            timer = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        }
        if let phase = action.phase { tracker.update(context.channel, to: phase) }
    }
}
