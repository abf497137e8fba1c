import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

/// One HTTP/2 connection of the simulated APNs, working on frames directly (no per-stream child
/// channels: this is the hot path of every benchmark). It collects each stream's headers and body,
/// applies Apple's rules, the connection's token rules and the faults, and answers. It also owns the
/// connection-level behaviours: the stream limit, GOAWAY, abrupt close and the idle timeout. A connection
/// to the push listener takes device pushes and broadcasts; one to the management listener takes
/// channel management.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Which of the simulator's two listeners accepted the connection.
    enum Listener: Sendable {
        /// Device pushes (`/3/device/`) and broadcasts (`/4/broadcasts/apps/`).
        case push
        /// Channel management (`/1/apps/`).
        case management
    }

    /// A stream whose request is still arriving.
    struct PendingStream {
        var headers: HPACKHeaders
        var body: ByteBuffer?
        var size = 0
    }

    /// Any body beyond this is 413 whatever the push type; answered without waiting for the rest.
    static let largestPayload = 5120
    /// The connection window the simulator grants, so a client is never throttled by flow control.
    static let connectionWindow = 16 << 20

    let core: SimulatorCore
    let listener: Listener
    var auth: ConnectionAuthStateMachine
    private(set) var connectionID = 0
    var context: ChannelHandlerContext?
    var streams = PendingStreams()
    var delayedResponses = 0
    /// Device pushes answered 200 on this connection, and those of them whose answer is still delayed.
    var acceptedPushes = 0
    var acceptancesAwaitingAnswer = 0
    /// Delayed answers by the millisecond they fall due (uptime, rounded up): one timer and one
    /// flush per millisecond, not per answer, as a busy server writes what is ready in one go.
    /// Per-answer timers and flushes cost the simulator (and its client, reading one frame per
    /// wake-up) three times the CPU of undelayed answers at a 100 ms latency.
    private var delayedByMillisecond: [UInt64: [DelayedAnswer]] = [:]
    var requestCount = 0
    var highestStreamID = HTTP2StreamID.rootStream
    var goAwayLastStreamID: HTTP2StreamID?
    var needsFlush = false
    var consumedWindow = 0
    /// Waiting for the first authorized request before granting more than one stream.
    var restricted: Bool
    var advertisedMaxStreams: UInt32
    var droppedAfterRejection = false
    /// Taken once per read batch: nothing on this event loop runs between a batch's frames.
    var lastActivity = NIODeadline.now()
    var idleCheck: RepeatedTask?
    var messageIDs = MessageIDGenerator()
    /// Header storage reused from answer to answer.
    var responseHeaders = HPACKHeaders()
    /// The last accepted path and its device token: a client sends the same path again and again.
    var lastPath: (path: String, token: String)?
    /// The registry's verdict for the last token and topic, valid while the registry's generation holds.
    var lastVerdict: (token: String, topic: String, generation: Int, verdict: DeviceRegistry.Verdict)?

    init(core: SimulatorCore, certificate: ClientCertificateIdentity?, listener: Listener = .push) {
        self.core = core
        self.listener = listener
        self.auth = ConnectionAuthStateMachine(
            mode: core.authMode(certificate: certificate),
            tokenUpdateWindow: core.configuration.tokenUpdateWindow
        )
        self.restricted = auth.startsRestricted
        self.advertisedMaxStreams = restricted ? 1 : core.maxConcurrentStreams
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS for the preface.
    var initialMaxConcurrentStreams: UInt32 { advertisedMaxStreams }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        connectionID = core.register(ConnectionControl(handler: NIOLoopBound(self, eventLoop: context.eventLoop)))
        core.observation.connectionOpened()
        let grant = Self.connectionWindow - 65_535
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: grant))),
            promise: nil)
        if let idle = core.configuration.idleTimeout {
            let period = TimeAmount.nanoseconds(max(idle.nanoseconds / 4, 1_000_000))
            // Cancelled in channelInactive, so holding the handler here ends with the connection.
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            idleCheck = context.eventLoop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in
                bound.value.checkIdle(timeout: .nanoseconds(idle.nanoseconds))
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleCheck?.cancel()
        core.unregister(connectionID)
        core.observation.connectionClosed()
        core.observation.streamsClosed(streams.count + delayedResponses)
        streams.removeAll()
        delayedResponses = 0
        acceptancesAwaitingAnswer = 0
        delayedByMillisecond.removeAll()
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        switch frame.payload {
        case .headers(let headers):
            if var pending = streams[id] {
                // Trailers: nothing APNs reads, but they may end the stream.
                if headers.endStream {
                    streams[id] = nil
                    finish(streamID: id, stream: &pending)
                }
                return
            }
            if let last = goAwayLastStreamID, id > last { return }
            if id > highestStreamID { highestStreamID = id }
            core.observation.streamOpened()
            var stream = PendingStream(headers: headers.headers)
            if headers.endStream {
                finish(streamID: id, stream: &stream)
            } else {
                streams[id] = stream
            }
        case .data(let payload):
            guard case .byteBuffer(var bytes) = payload.data else { return }
            giveBackWindow(bytes.readableBytes + (payload.paddingBytes.map { $0 + 1 } ?? 0))
            guard var stream = streams[id] else { return }
            stream.size += bytes.readableBytes
            if stream.size <= Self.largestPayload {
                if stream.body == nil {
                    stream.body = bytes
                } else {
                    stream.body!.writeBuffer(&bytes)
                }
            }
            if payload.endStream || stream.size > Self.largestPayload {
                streams[id] = nil
                // Answered before the body ended: the client is told to stop sending it (RST_STREAM
                // NO_ERROR once the answer is out).
                finish(streamID: id, stream: &stream, resetAfterAnswer: !payload.endStream)
            } else {
                streams[id] = stream
            }
        case .rstStream:
            if streams.removeValue(forKey: id) != nil { core.observation.streamsClosed(1) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        lastActivity = .now()
        if needsFlush {
            needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    // MARK: requests

    private func finish(streamID: HTTP2StreamID, stream: inout PendingStream, resetAfterAnswer: Bool = false) {
        guard let context else { return }
        requestCount += 1
        let head = RequestHead(stream.headers)
        var outcome = evaluate(head, stream: &stream)
        let decision = core.faults.decide(target: outcome.faultTarget, eligible: outcome.reason == nil)
        if let closeAfter = decision.connection.closeAfter, requestCount >= closeAfter {
            // Abrupt close: no answer, no GOAWAY, as a lost connection looks to a client.
            context.close(promise: nil)
            return
        }
        if outcome.reason == nil, let fault = decision.reason { outcome.reason = fault }
        let response = makeResponse(outcome, head: head, stream: stream)
        if response.acceptsDevicePush { acceptedPushes += 1 }
        if decision.delayNanoseconds > 0 {
            delayedResponses += 1
            if response.acceptsDevicePush { acceptancesAwaitingAnswer += 1 }
            let due = (NIODeadline.now().uptimeNanoseconds + UInt64(decision.delayNanoseconds) + 999_999) / 1_000_000
            let answer = DelayedAnswer(
                response: response, streamID: streamID, resetAfter: resetAfterAnswer, decision: decision)
            if delayedByMillisecond[due]?.append(answer) == nil {
                delayedByMillisecond[due] = [answer]
                context.eventLoop.assumeIsolated().scheduleTask(
                    deadline: .uptimeNanoseconds(due * 1_000_000)
                ) { [self] in
                    answerDelayed(due: due)
                }
            }
        } else {
            write(response, streamID: streamID, context: context, resetAfter: resetAfterAnswer)
            needsFlush = true
            afterResponse(response, decision: decision)
        }
    }

    /// Writes the answers that fell due in one millisecond, then flushes once.
    private func answerDelayed(due: UInt64) {
        // After channelInactive the answers were dropped: they have nowhere to go.
        guard let answers = delayedByMillisecond.removeValue(forKey: due) else { return }
        for answer in answers {
            // An answer's aftermath (a GOAWAY, a close) may end the connection for the rest.
            guard let context else { return }
            delayedResponses -= 1
            if answer.response.acceptsDevicePush { acceptancesAwaitingAnswer -= 1 }
            write(answer.response, streamID: answer.streamID, context: context, resetAfter: answer.resetAfter)
            afterResponse(answer.response, decision: answer.decision)
        }
        context?.flush()
    }

    private func afterResponse(_ response: Response, decision: FaultInjector.Decision) {
        let connectionFaults = decision.connection
        if response.reason != nil, let drop = connectionFaults.dropStreamsAfterRejection, !restricted {
            droppedAfterRejection = true
            advertise(drop)
        } else if response.reason == nil, droppedAfterRejection {
            droppedAfterRejection = false
            advertise(core.maxConcurrentStreams)
        }
        if let after = connectionFaults.goAwayAfter, requestCount >= after, goAwayLastStreamID == nil {
            goAway(reason: connectionFaults.goAwayReason)
        }
        closeIfDrained()
    }
}

/// An answer held back by injected latency.
struct DelayedAnswer {
    let response: APNsConnectionHandler.Response
    let streamID: HTTP2StreamID
    let resetAfter: Bool
    let decision: FaultInjector.Decision
}
