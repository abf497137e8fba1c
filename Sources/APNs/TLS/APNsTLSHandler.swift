import NIOCore

/// Fired inbound once the TLS handshake succeeded with ALPN `h2`: the HTTP/2 handler starts then.
struct TLSEstablishedEvent: Sendable {
    var protocolVersion: String
}

/// TLS through OpenSSL memory BIOs, as a SwiftNIO handler: ciphertext below, plaintext above.
///
/// Writes made before the handshake completes are held and encrypted after it. A handshake that
/// fails (certificate chain, host name, no ALPN `h2`) raises a typed `APNsClientError` and closes.
/// Runs on its channel's event loop only.
final class APNsTLSHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case idle, handshaking, active, closed
    }

    private let connection: OpenSSLConnection
    private var state = State.idle
    private var heldWrites: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var plaintext: [UInt8] = .init(repeating: 0, count: 16_384)

    init(connection: OpenSSLConnection) {
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startHandshake(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        startHandshake(context: context)
    }

    private func startHandshake(context: ChannelHandlerContext) {
        guard state == .idle else { return }
        state = .handshaking
        continueHandshake(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { connection.receive($0) }
        switch state {
        case .handshaking: continueHandshake(context: context)
        case .active: readPlaintext(context: context)
        case .idle, .closed: break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
    }

    private func continueHandshake(context: ChannelHandlerContext) {
        let step = connection.handshake()
        flushCiphertext(context: context, promise: nil)
        switch step {
        case .wantRead:
            return
        case .closed:
            fail(
                context: context,
                APNsClientError(.tlsHandshakeFailed, "closed during the TLS handshake", mayHaveReachedAPNs: false))
        case .failed(let failure):
            fail(context: context, Self.error(for: failure))
        case .done:
            guard connection.negotiatedProtocol == "h2" else {
                let got = connection.negotiatedProtocol ?? "none"
                fail(
                    context: context,
                    APNsClientError(
                        .alpnRefused, "server did not select ALPN h2 (got \(got))", mayHaveReachedAPNs: false))
                return
            }
            state = .active
            context.fireUserInboundEventTriggered(TLSEstablishedEvent(protocolVersion: connection.protocolVersion))
            let held = heldWrites
            heldWrites = []
            for (buffer, promise) in held { encrypt(context: context, buffer, promise: promise) }
            if !held.isEmpty { context.flush() }
            readPlaintext(context: context)
        }
    }

    private func readPlaintext(context: ChannelHandlerContext) {
        while state == .active {
            let (count, stop) = plaintext.withUnsafeMutableBytes { connection.read(into: $0) }
            if count > 0 {
                var buffer = context.channel.allocator.buffer(capacity: count)
                _ = plaintext.withUnsafeBytes { buffer.writeBytes(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
                context.fireChannelRead(wrapInboundOut(buffer))
                continue
            }
            switch stop {
            case .done, .wantRead:
                flushCiphertext(context: context, promise: nil)  // TLS 1.3 key updates, session tickets
                return
            case .closed:
                context.close(promise: nil)
                return
            case .failed(let failure):
                fail(
                    context: context,
                    APNsClientError(
                        .connectionLost, "TLS record error", mayHaveReachedAPNs: true, tlsDetail: failure.stack))
                return
            }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapOutboundIn(data)
        switch state {
        case .idle, .handshaking: heldWrites.append((buffer, promise))
        case .active: encrypt(context: context, buffer, promise: promise)
        case .closed: promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    func flush(context: ChannelHandlerContext) {
        if state == .active { context.flush() }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if state == .active, mode == .all {
            connection.shutdown()  // close_notify
            flushCiphertext(context: context, promise: nil)
            context.flush()
        }
        state = .closed
        failHeldWrites(ChannelError.ioOnClosedChannel)
        context.close(mode: mode, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        state = .closed
        failHeldWrites(ChannelError.eof)
        context.fireChannelInactive()
    }

    private func encrypt(context: ChannelHandlerContext, _ buffer: ByteBuffer, promise: EventLoopPromise<Void>?) {
        let step = buffer.withUnsafeReadableBytes { connection.write($0) }
        if case .failed(let failure) = step {
            promise?.fail(
                APNsClientError(
                    .connectionLost, "TLS write failed", mayHaveReachedAPNs: false, tlsDetail: failure.stack))
            fail(
                context: context,
                APNsClientError(.connectionLost, "TLS write failed", mayHaveReachedAPNs: true, tlsDetail: failure.stack)
            )
            return
        }
        flushCiphertext(context: context, promise: promise)
    }

    /// Moves whatever OpenSSL produced onto the socket (written, not flushed, unless handshaking).
    private func flushCiphertext(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        let count = connection.pendingOutputCount
        guard count > 0 else {
            promise?.succeed()
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: count)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { connection.readOutput(into: $0) }
        context.write(wrapOutboundOut(buffer), promise: promise)
        if state != .active { context.flush() }
    }

    private func failHeldWrites(_ error: any Error) {
        let held = heldWrites
        heldWrites = []
        for (_, promise) in held { promise?.fail(error) }
    }

    private func fail(context: ChannelHandlerContext, _ error: APNsClientError) {
        guard state != .closed else { return }
        state = .closed
        failHeldWrites(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private static func error(for failure: OpenSSLHandshakeFailure) -> APNsClientError {
        if let code = failure.verifyCode {
            return APNsClientError(
                .serverCertificateRejected,
                "server certificate did not verify: \(failure.verifyReason ?? "code \(code)")",
                mayHaveReachedAPNs: false, tlsDetail: failure.stack)
        }
        return APNsClientError(
            .tlsHandshakeFailed, "TLS handshake failed", mayHaveReachedAPNs: false, tlsDetail: failure.stack)
    }
}
