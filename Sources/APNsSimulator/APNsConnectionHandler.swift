import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

/// One HTTP/2 connection of the simulated APNs, working on frames directly (no per-stream child
/// channels: this is the hot path of every benchmark). It collects each stream's headers and body,
/// applies Apple's rules, the connection's token rules and the faults, and answers. It also owns the
/// connection-level behaviours: the stream limit, GOAWAY, abrupt close and the idle timeout.
final class APNsConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

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
    var auth: ConnectionAuthStateMachine
    private(set) var connectionID = 0
    var context: ChannelHandlerContext?
    var streams = PendingStreams()
    var delayedResponses = 0
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

    init(core: SimulatorCore, certificate: ClientCertificateIdentity?) {
        self.core = core
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
        let decision = core.faults.decide(deviceToken: outcome.deviceToken ?? "", eligible: outcome.reason == nil)
        if let closeAfter = decision.connection.closeAfter, requestCount >= closeAfter {
            // Abrupt close: no answer, no GOAWAY, as a lost connection looks to a client.
            context.close(promise: nil)
            return
        }
        if outcome.reason == nil, let fault = decision.reason { outcome.reason = fault }
        let response = makeResponse(outcome, head: head, stream: stream)
        if decision.delayNanoseconds > 0 {
            delayedResponses += 1
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(decision.delayNanoseconds)) { [self] in
                // After channelInactive the count was reset and the answer has nowhere to go.
                guard let context = self.context else { return }
                delayedResponses -= 1
                write(response, streamID: streamID, context: context, resetAfter: resetAfterAnswer)
                context.flush()
                afterResponse(response, decision: decision)
            }
        } else {
            write(response, streamID: streamID, context: context, resetAfter: resetAfterAnswer)
            needsFlush = true
            afterResponse(response, decision: decision)
        }
    }

    /// The verdict of the rules, the token state machine and the registry, before faults.
    private func evaluate(_ head: RequestHead, stream: inout PendingStream) -> Outcome {
        var outcome = Outcome()
        if !head.hasDuplicates, head.method == "POST", let path = head.path, let last = lastPath, last.path == path {
            outcome.deviceToken = last.token
        } else {
            switch RequestRules.checkLine(head) {
            case .failure(let reason):
                outcome.reason = reason
                return outcome
            case .success(let token):
                outcome.deviceToken = token
                lastPath = (head.path!, token)
            }
        }
        let authorization: RequestAuthorization
        switch auth.authorize(header: head.authorization, now: core.clock.now(), verifier: core.verifier) {
        case .refuse(let reason):
            outcome.reason = reason
            return outcome
        case .authorized(let granted, let raise):
            authorization = granted
            if raise { liftRestriction() }
        }
        if case .certificate(let identity) = authorization {
            switch identity.validity {
            case .valid: break
            case .bad:
                outcome.reason = .badCertificate
                return outcome
            case .wrongEnvironment:
                outcome.reason = .badCertificateEnvironment
                return outcome
            }
        }
        let checked: CheckedRequest
        switch RequestRules.checkHeaders(
            head,
            deviceToken: outcome.deviceToken!,
            authorization: authorization,
            acceptUppercaseMessageID: core.configuration.acceptsUppercaseMessageID
        ) {
        case .failure(let reason):
            outcome.reason = reason
            return outcome
        case .success(let request): checked = request
        }
        outcome.request = checked
        let payloadReason: APNsReason? =
            if let body = stream.body {
                body.withUnsafeReadableBytes {
                    RequestRules.checkPayload($0, size: stream.size, limit: checked.maximumPayloadSize)
                }
            } else {
                stream.size == 0 ? .payloadEmpty : .payloadTooLarge
            }
        if let payloadReason {
            outcome.reason = payloadReason
            return outcome
        }
        switch registryVerdict(token: checked.deviceToken, topic: checked.topic) {
        case .deliver: break
        case .reject(let reason): outcome.reason = reason
        case .unregistered(let since):
            outcome.reason = .unregistered
            outcome.unregisteredSince = since
        }
        return outcome
    }

    private func registryVerdict(token: String, topic: String) -> DeviceRegistry.Verdict {
        let generation = core.devices.generation
        if let last = lastVerdict, last.generation == generation, last.token == token, last.topic == topic {
            return last.verdict
        }
        let verdict = core.devices.verdict(token: token, topic: topic, environment: core.configuration.environment)
        lastVerdict = (token, topic, generation, verdict)
        return verdict
    }

    private func afterResponse(_ response: Response, decision: FaultInjector.Decision) {
        let connectionFaults = decision.connection
        if response.status != 200, let drop = connectionFaults.dropStreamsAfterRejection, !restricted {
            droppedAfterRejection = true
            advertise(drop)
        } else if response.status == 200, droppedAfterRejection {
            droppedAfterRejection = false
            advertise(core.maxConcurrentStreams)
        }
        if let after = connectionFaults.goAwayAfter, requestCount >= after, goAwayLastStreamID == nil {
            goAway(reason: connectionFaults.goAwayReason)
        }
        closeIfDrained()
    }
}

extension APNsConnectionHandler {
    /// The answer to one request before it is written.
    struct Outcome {
        var deviceToken: String?
        var request: CheckedRequest?
        var reason: APNsReason?
        var unregisteredSince: Double?
    }
}
