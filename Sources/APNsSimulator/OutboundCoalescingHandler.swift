import NIOCore

/// Sits between TLS and HTTP/2 and gathers the bytes the HTTP/2 handler writes until the next flush, so
/// one flush makes one `SSL_write` (and one TLS record per 16 KiB) instead of one per frame. A 200 answer
/// is a HEADERS frame of about 45 bytes: sealed alone it cost an `SSL_write`, 29 bytes of record overhead
/// and a decryption on the client, for every answer. Copying the frame out at once also hands the HTTP/2
/// handler its scratch buffer back, so the next frame is encoded without a copy-on-write reallocation.
/// Bytes, their order and the flush points are unchanged; only TLS record boundaries move.
final class OutboundCoalescingHandler: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// Above this capacity the buffer is not kept between flushes (a burst should not pin memory).
    private static let retainedCapacity = 64 << 10

    private var pending: ByteBuffer?
    /// The promise of the gathered bytes; the promises of later writes are chained to it.
    private var promise: EventLoopPromise<Void>?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .byteBuffer(var bytes) = unwrapOutboundIn(data) else {
            // A file region (never written by HTTP/2 here) keeps its place after what came before.
            writePending(context: context)
            context.write(data, promise: promise)
            return
        }
        if pending == nil {
            pending = context.channel.allocator.buffer(capacity: max(bytes.readableBytes, 4096))
        }
        pending!.writeBuffer(&bytes)
        guard let promise else { return }
        if let gathered = self.promise {
            gathered.futureResult.cascade(to: promise)
        } else {
            self.promise = promise
        }
    }

    func flush(context: ChannelHandlerContext) {
        writePending(context: context)
        context.flush()
        // TLS has sealed the bytes by now and let go of the buffer, so clearing it reuses its storage.
        if pending != nil {
            if pending!.capacity > Self.retainedCapacity { pending = nil } else { pending!.clear() }
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Unflushed bytes reach TLS unflushed, as they did without this handler; it decides their fate.
        writePending(context: context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // The channel went away between a write and its flush; TLS would have failed it the same way.
        promise?.fail(ChannelError.ioOnClosedChannel)
        promise = nil
        pending = nil
    }

    private func writePending(context: ChannelHandlerContext) {
        guard let bytes = pending, bytes.readableBytes > 0 else { return }
        let gathered = promise
        promise = nil
        // Only the indices move: the storage stays shared with TLS until it is done with it.
        pending!.moveReaderIndex(forwardBy: bytes.readableBytes)
        context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: gathered)
    }
}
