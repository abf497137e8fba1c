import NIOCore
import NIOHTTP1

/// One connection of the operations endpoint: answers each request with the router's response.
/// Requests have no body worth reading; keep-alive follows the client.
final class OperationsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: OperationsRouter
    private var request: HTTPRequestHead?

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
