internal import CNghttp2
import Foundation
import NIOCore

/// What a connection tells its pool. Called on the connection's event loop, never from inside an
/// nghttp2 callback's stack frame with the handler's state half-updated.
struct APNsConnectionEvents: Sendable {
    /// The first SETTINGS arrived: the connection can take `capacity` streams.
    var ready: @Sendable (_ capacity: Int) -> Void
    /// MAX_CONCURRENT_STREAMS (or the one-stream rule) changed.
    var capacityChanged: @Sendable (_ capacity: Int) -> Void
    /// GOAWAY: take no new requests; replace the connection.
    var goingAway: @Sendable (_ reason: String?) -> Void
    /// The channel closed; `error` says why when it was not asked for.
    var closed: @Sendable (_ error: APNsClientError?) -> Void
}

/// Settings of the HTTP/2 layer of one connection.
struct APNsHTTP2Settings: Sendable {
    var maximumStreams: Int
    var tokenAuthentication: Bool
    /// Send a PING after this long without reading anything.
    var pingInterval: TimeAmount
    /// Close the connection when a PING is not answered within this.
    var pingTimeout: TimeAmount
    /// The TLS handshake and the server's first SETTINGS must arrive within this after connecting.
    var setupTimeout: TimeAmount
}

/// The nghttp2 client session of one APNs connection, as the handler above TLS.
///
/// Requests arrive from the pool's `APNsConnection` (`enqueue`); each is answered through its own
/// completion with an `APNsResponse` or an `APNsClientError`. Event-loop-only.
final class APNsHTTP2Handler: ChannelDuplexHandler, Nghttp2SessionDelegate {
    typealias InboundIn = ByteBuffer
    /// Nothing is written into this handler: requests come through `enqueue`.
    typealias OutboundIn = Never
    typealias OutboundOut = ByteBuffer

    private let events: APNsConnectionEvents
    private var session: Nghttp2Session?
    var state: StateMachine
    private var encoder: APNsHeaderEncoder
    private var headerBlock = Nghttp2HeaderBlock()
    var waiting = CircularBuffer<APNsHTTP2Stream>()
    var streams: [Int32: APNsHTTP2Stream] = [:]
    private var context: ChannelHandlerContext?
    /// The scheduled task of each armed timer. `state` decides when each is armed and cancelled.
    private var timers = Timers()
    var goAwayReason: String?
    /// Why the connection is closing, given to every stream still open when it closes.
    private var closeCause: APNsClientError?
    /// The buffer the last flush wrote nghttp2's frames into, kept for the next (`flushSession`).
    private var output: ByteBuffer?
    /// A flush's buffer larger than this is not kept: an idle connection holds at most this much.
    private static let keptOutputCapacity = 64 * 1024

    init(authority: String, settings: APNsHTTP2Settings, events: APNsConnectionEvents) {
        self.events = events
        self.state = StateMachine(settings: settings)
        self.encoder = APNsHeaderEncoder(authority: authority)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { apply(state.connected(now: .now())) }
    }

    /// The TLS + HTTP/2 setup is timed from the moment the byte stream to APNs exists: after the
    /// TCP connect (bounded by the bootstrap's connect timeout) and, through a proxy, after its
    /// CONNECT tunnel (bounded by the proxy handler's own timeout), so each failure says which it was.
    func channelActive(context: ChannelHandlerContext) {
        apply(state.connected(now: .now()))
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        for timer in state.closed() { timers.cancel(timer) }
        self.context = nil
        output = nil
        session = nil
    }

    // MARK: Inbound

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is TLSEstablishedEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        do {
            session = try Nghttp2Session(delegate: self)
        } catch {
            closeWithError(
                error as? APNsClientError ?? APNsClientError(.protocolError, "\(error)", mayHaveReachedAPNs: false))
            return
        }
        flushSession()
        apply(state.sessionStarted(now: .now()))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        state.received(now: .now())
        guard let session else { return }
        let failure = insideSession { buffer.withUnsafeReadableBytes { session.receive($0) } }
        runDeferred()
        if let failure {
            closeWithError(APNsClientError(.protocolError, "HTTP/2: \(failure)", mayHaveReachedAPNs: true))
            return
        }
        submitWaiting()
        if !session.isAlive || state.isDrained {
            flushSession()
            context.close(promise: nil)
        }
    }

    /// One flush per batch of reads: the WINDOW_UPDATEs and new requests of many answers go out in
    /// one TLS record and one syscall.
    func channelReadComplete(context: ChannelHandlerContext) {
        flushSession()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        for timer in state.closed() { timers.cancel(timer) }
        let cause = closeCause
        for stream in streams.values where !stream.finished {
            stream.fail(
                cause
                    ?? APNsClientError(
                        .connectionLost, "connection closed before the answer", mayHaveReachedAPNs: true,
                        goAwayReason: goAwayReason))
        }
        // The session goes first: it holds unretained pointers to the streams (their stream data),
        // and nothing may reach them through it once they are gone.
        session = nil
        streams.removeAll()
        failWaiting(
            APNsClientError(
                cause?.code ?? .connectionLost, "connection closed before the request was sent",
                mayHaveReachedAPNs: false,
                goAwayReason: goAwayReason))
        events.closed(cause)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        closeWithError(
            error as? APNsClientError ?? APNsClientError(.connectionLost, "\(error)", mayHaveReachedAPNs: true))
    }

    // MARK: Outbound

    /// Requests handed over by the pool's `APNsConnection`, straight from the event loop (no trip
    /// through the pipeline, no write promise each): queued, submitted as far as streams allow,
    /// written in one flush. A handler already removed from its channel fails them as not sent.
    func enqueue(_ requests: [APNsHTTP2Request]) {
        guard context != nil else {
            for request in requests {
                request.complete(
                    .failure(
                        APNsClientError(.connectionLost, "connection closed before sending", mayHaveReachedAPNs: false)
                    ))
            }
            return
        }
        for request in requests { accept(request) }
        submitWaiting()
        flushSession()
    }

    private func accept(_ request: APNsHTTP2Request) {
        let stream = APNsHTTP2Stream(request: request)
        // A server may set MAX_CONCURRENT_STREAMS to 0 for a while: then requests wait; only a
        // connection that is going away or closed refuses them.
        if state.isGoingAwayOrClosed {
            stream.fail(
                APNsClientError(
                    .goAway, "connection is closing; request not sent", mayHaveReachedAPNs: false,
                    goAwayReason: goAwayReason))
            return
        }
        apply(state.requestQueued(deadline: request.deadline))
        waiting.append(stream)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if let session, mode == .all {
            session.terminate()  // GOAWAY(NO_ERROR) so the server knows we left on purpose
            flushSession()
        }
        context.close(mode: mode, promise: promise)
    }

    // MARK: Streams

    private func submitWaiting() {
        guard let session else { return }
        while state.canOpenStream, let stream = waiting.popFirst() {
            if stream.finished { continue }
            encoder.encode(stream.request, into: &headerBlock)
            // nghttp2 hands this pointer back with each callback of the stream; `streams` keeps the
            // object alive until the stream closes.
            let streamID = session.submitRequest(
                headerBlock, streamData: Unmanaged.passUnretained(stream).toOpaque(),
                hasBody: !stream.request.content.body.isEmpty)
            guard streamID > 0 else {
                stream.fail(
                    APNsClientError(
                        .protocolError, "nghttp2 refused the request: \(String(cString: nghttp2_strerror(streamID)))",
                        mayHaveReachedAPNs: false))
                continue
            }
            stream.streamID = streamID
            stream.submittedAt = .now()
            streams[streamID] = stream
            state.streamOpened()
        }
    }

    // MARK: Deadlines

    /// Fails every request past its deadline (answered or not yet sent) and re-arms the timer for
    /// the earliest deadline left; it scans at most the connection's open streams and queue.
    private func deadlineTimerFired() {
        let now = NIODeadline.now()
        var earliest: NIODeadline?
        var reset = false
        for stream in streams.values where !stream.finished {
            if stream.request.deadline <= now {
                stream.fail(
                    APNsClientError(.deadlineExceeded, "no answer before the deadline", mayHaveReachedAPNs: true))
                if let streamID = stream.streamID {
                    session?.resetStream(streamID)  // the stream stays counted until nghttp2 closes it
                    reset = true
                }
            } else if earliest.map({ stream.request.deadline < $0 }) ?? true {
                earliest = stream.request.deadline
            }
        }
        for stream in waiting where !stream.finished {
            if stream.request.deadline <= now {
                stream.fail(
                    APNsClientError(.deadlineExceeded, "no stream free before the deadline", mayHaveReachedAPNs: false))
            } else if earliest.map({ stream.request.deadline < $0 }) ?? true {
                earliest = stream.request.deadline
            }
        }
        if reset { flushSession() }
        apply(state.deadlinesExpired(earliestLeft: earliest))
    }

    private func failWaiting(_ error: APNsClientError) {
        while let stream = waiting.popFirst() { stream.fail(error) }
    }

    /// Writes what nghttp2 has ready to the TLS handler and flushes.
    /// Writes every frame nghttp2 has ready, in one write.
    ///
    /// The buffer is reused from flush to flush: the TLS handler encrypts a write at once and keeps
    /// no reference to it, so its storage is this handler's alone again by the next flush. A new
    /// buffer per flush grew through a string of reallocations for a batch's frames (from 256 bytes
    /// to tens of KiB), each of those sizes under the allocator's arena lock, which other threads
    /// freeing this event loop's blocks were taking too. A buffer still shared (a write held during
    /// the TLS handshake) is not overwritten: `clear` gives it new storage.
    private func flushSession() {
        guard let context, let session else { return }
        var buffer = output ?? context.channel.allocator.buffer(capacity: 4096)
        output = nil  // so that `buffer` is the storage's only owner here
        buffer.clear()
        let failure = insideSession { session.send(into: &buffer) }
        runDeferred()
        if let failure {
            closeWithError(APNsClientError(.protocolError, "HTTP/2: \(failure)", mayHaveReachedAPNs: true))
            return
        }
        guard buffer.readableBytes > 0 else {
            output = buffer
            return
        }
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        if buffer.capacity <= Self.keptOutputCapacity { output = buffer }
    }

    private func closeWithError(_ error: APNsClientError) {
        if closeCause == nil { closeCause = error }
        context?.close(promise: nil)
    }

    // MARK: Timers

    /// The scheduled task of each timer, so that arming one replaces its earlier task.
    private struct Timers {
        var setup: Scheduled<Void>?
        var pingCheck: Scheduled<Void>?
        var pingTimeout: Scheduled<Void>?
        var deadline: Scheduled<Void>?

        subscript(timer: StateMachine.Timer) -> Scheduled<Void>? {
            get {
                switch timer {
                case .setup: setup
                case .pingCheck: pingCheck
                case .pingTimeout: pingTimeout
                case .deadline: deadline
                }
            }
            set {
                switch timer {
                case .setup: setup = newValue
                case .pingCheck: pingCheck = newValue
                case .pingTimeout: pingTimeout = newValue
                case .deadline: deadline = newValue
                }
            }
        }

        mutating func cancel(_ timer: StateMachine.Timer) {
            self[timer]?.cancel()
            self[timer] = nil
        }
    }

    /// Does what the state machine decided about a timer (named apart from `perform`, which runs
    /// the work raised inside nghttp2).
    func apply(_ action: StateMachine.TimerAction?) {
        switch action {
        case .schedule(let timer, let deadline):
            guard let context else { return }
            timers[timer]?.cancel()
            timers[timer] = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [weak self] in
                self?.timerFired(timer)
            }
        case .cancel(let timer):
            timers.cancel(timer)
        case nil:
            break
        }
    }

    private func timerFired(_ timer: StateMachine.Timer) {
        timers[timer] = nil
        switch timer {
        case .setup:
            if let error = state.setupTimedOut() { closeWithError(error) }
        case .pingTimeout:
            if let error = state.pingTimedOut() { closeWithError(error) }
        case .deadline:
            deadlineTimerFired()
        case .pingCheck:
            switch state.pingCheckDue(now: .now()) {
            case .sendPing(let timeoutAt, let nextCheckAt):
                session?.submitPing()
                flushSession()
                apply(.schedule(.pingTimeout, at: timeoutAt))
                apply(.schedule(.pingCheck, at: nextCheckAt))
            case .checkAgain(let at):
                apply(.schedule(.pingCheck, at: at))
            case .none:
                break
            }
        }
    }

    func nghttp2PingAcknowledged() {
        apply(state.pingAcknowledged())
    }

    // MARK: work raised inside nghttp2

    /// What an nghttp2 callback raised, done once nghttp2 has returned. A completion or a pool
    /// event can close the channel or hand requests over, and neither may reach into the session
    /// while one of its calls (`receive`, `send`) is on the stack: closing would terminate and flush
    /// the session from inside itself.
    enum Deferred {
        case succeed(APNsHTTP2Stream, APNsResponse)
        case fail(APNsHTTP2Stream, APNsClientError)
        case ready(capacity: Int)
        case capacityChanged(capacity: Int)
        case goingAway(reason: String?)
    }

    private var deferred: [Deferred] = []
    /// Calls into the session now on the stack.
    private var sessionDepth = 0

    private func insideSession<T>(_ body: () -> T) -> T {
        sessionDepth += 1
        defer { sessionDepth -= 1 }
        return body()
    }

    /// Does `work` now, or once the session call on the stack has returned.
    func raise(_ work: Deferred) {
        if sessionDepth > 0 { deferred.append(work) } else { perform(work) }
    }

    private func runDeferred() {
        guard sessionDepth == 0 else { return }
        // The batch is swapped out rather than copied: `removeAll(keepingCapacity:)` on storage a
        // copy still shares allocates new storage, once per read. It is reversed so that each item
        // moves out with `popLast` (a copy per item was a retain and a release of every field of
        // each answer), and its storage comes back for the next read.
        var batch: [Deferred] = []
        while !deferred.isEmpty {
            swap(&batch, &deferred)
            batch.reverse()
            while let work = batch.popLast() { perform(work) }
            if deferred.isEmpty { swap(&batch, &deferred) }
        }
    }

    private func perform(_ work: Deferred) {
        switch work {
        case .succeed(let stream, let response): stream.succeed(response)
        case .fail(let stream, let error): stream.fail(error)
        case .ready(let capacity): events.ready(capacity)
        case .capacityChanged(let capacity): events.capacityChanged(capacity)
        case .goingAway(let reason): events.goingAway(reason)
        }
    }
}
