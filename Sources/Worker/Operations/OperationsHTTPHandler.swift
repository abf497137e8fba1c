import NIOCore
import NIOHTTP1

/// One connection of the operations endpoint: answers each request with the router's response.
/// Requests have no body worth reading; keep-alive follows the client.
///
/// An answer is produced only while the channel takes more bytes: a client that pipelines requests
/// and reads no answer gets what fills the socket's buffers and one answer more, not one answer per
/// request it sent. The rest wait as requests, few: `HTTPServerPipelineHandler` hands over a request
/// only once the previous answer is written, and reads nothing more meanwhile.
final class OperationsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: OperationsRouter
    private var request: HTTPRequestHead?
    /// Requests received whole, not answered yet: the channel was not writable, or the request came
    /// while one was being written.
    private var waiting = CircularBuffer<HTTPRequestHead>()
    /// Inside `answerWaiting`: writing an answer's end hands over the next pipelined request at once
    /// (`channelRead`), which the loop there answers instead of a recursion as deep as the pipeline.
    private var answering = false

    init(router: OperationsRouter) {
        self.router = router
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
        case .body:
            break
        case .end:
            guard let head = request else { return }
            request = nil
            context.triggerUserOutboundEvent(RequestDeadlineHandler.Event.requestReceived, promise: nil)
            waiting.append(head)
            answerWaiting(context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        answerWaiting(context: context)
        context.fireChannelWritabilityChanged()
    }

    private func answerWaiting(context: ChannelHandlerContext) {
        guard !answering else { return }
        answering = true
        defer { answering = false }
        while context.channel.isWritable, let head = waiting.popFirst() {
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let response = router.respond(method: head.method, uri: head.uri)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: response.contentType)
        headers.add(name: "Content-Length", value: String(response.body.count))
        headers.add(name: "Cache-Control", value: "no-store")
        for (name, value) in response.extraHeaders { headers.add(name: name, value: value) }
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }

        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))),
            promise: nil)
        if head.method != .HEAD {
            var buffer = context.channel.allocator.buffer(capacity: response.body.count)
            buffer.writeBytes(response.body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        let channel = context.channel
        done.futureResult.whenComplete { _ in
            if keepAlive {
                channel.triggerUserOutboundEvent(
                    RequestDeadlineHandler.Event.responseSent(keepAlive: true), promise: nil)
            } else {
                channel.close(promise: nil)
            }
        }
    }
}
