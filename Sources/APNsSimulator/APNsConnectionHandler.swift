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

    /// The verdict of the rules, the token state machine and the registry, before faults.
    private func evaluate(_ head: RequestHead, stream: inout PendingStream) -> Outcome {
        var outcome = Outcome()
        if !head.hasDuplicates, head.method == "POST", let path = head.path, let last = lastPath, last.path == path {
            outcome.deviceToken = last.token
        } else {
            if listener == .management { return evaluateManagement(head, stream: stream) }
            if let path = head.path, BroadcastRules.isBroadcastPath(path) {
                return evaluateBroadcast(head, stream: stream)
            }
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
        switch authorize(head) {
        case .failure(let reason):
            outcome.reason = reason
            return outcome
        case .success(let granted): authorization = granted
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
        if let payloadReason = checkPayload(stream, limit: checked.maximumPayloadSize) {
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

    /// The provider token (through the connection's state machine) or the client certificate.
    private func authorize(_ head: RequestHead) -> Result<RequestAuthorization, SimulatorReason> {
        switch auth.authorize(header: head.authorization, now: core.clock.now(), verifier: core.verifier) {
        case .refuse(let reason):
            return .failure(reason)
        case .authorized(let granted, let raise):
            if raise { liftRestriction() }
            if case .certificate(let identity) = granted {
                switch identity.validity {
                case .valid: break
                case .bad: return .failure(.badCertificate)
                case .wrongEnvironment: return .failure(.badCertificateEnvironment)
                }
            }
            return .success(granted)
        }
    }

    /// Empty, too large, or not a JSON object.
    private func checkPayload(_ stream: PendingStream, limit: Int) -> SimulatorReason? {
        if let body = stream.body {
            return body.withUnsafeReadableBytes { RequestRules.checkPayload($0, size: stream.size, limit: limit) }
        }
        return stream.size == 0 ? .payloadEmpty : .payloadTooLarge
    }

    /// `POST /4/broadcasts/apps/<bundle ID>` on the push listener: line, credential, app, headers, channel,
    /// payload. Nothing is recorded here: a fault may still take the request's place.
    private func evaluateBroadcast(_ head: RequestHead, stream: PendingStream) -> Outcome {
        var outcome = Outcome(other: .broadcast(nil))
        let bundleID: String
        switch BroadcastRules.checkBroadcastLine(head) {
        case .failure(let reason): return outcome.refused(reason)
        case .success(let id): bundleID = id
        }
        if let reason = checkCallerAndApp(head, bundleID: bundleID) { return outcome.refused(reason) }
        let request: BroadcastRequest
        switch BroadcastRules.checkBroadcastHeaders(
            head, bundleID: bundleID, acceptUppercaseRequestID: core.configuration.acceptsUppercaseMessageID)
        {
        case .failure(let reason): return outcome.refused(reason)
        case .success(let checked): request = checked
        }
        outcome.other = .broadcast(request)
        guard let channel = core.channels.channel(request.channelID, bundleID: bundleID) else {
            return outcome.refused(.channelNotRegistered)
        }
        if let reason = BroadcastRules.checkExpiration(request, channel: channel) { return outcome.refused(reason) }
        if let reason = checkPayload(stream, limit: BroadcastRules.maximumPayloadSize) {
            return outcome.refused(reason)
        }
        return outcome
    }

    /// A channel-management request: line, credential, app, request id, then what the call needs (the
    /// create body and the app's room for one more channel; the channel of a read or delete). The
    /// registry changes only once the answer is made, after faults.
    private func evaluateManagement(_ head: RequestHead, stream: PendingStream) -> Outcome {
        var outcome = Outcome(other: .management(nil))
        let bundleID: String
        var plan: ManagementPlan
        switch BroadcastRules.checkManagementLine(head) {
        case .failure(let reason): return outcome.refused(reason)
        case .success(let (id, call)):
            bundleID = id
            plan = ManagementPlan(bundleID: id, call: call)
        }
        if let reason = checkCallerAndApp(head, bundleID: bundleID) { return outcome.refused(reason) }
        if let reason = BroadcastRules.checkRequestID(
            head, acceptUppercase: core.configuration.acceptsUppercaseMessageID)
        {
            return outcome.refused(reason)
        }
        switch plan.call {
        case .create:
            if stream.size > BroadcastRules.maximumPayloadSize { return outcome.refused(.payloadTooLarge) }
            switch BroadcastRules.checkCreateBody(stream.body.map { Array($0.readableBytesView) } ?? []) {
            case .failure(let reason): return outcome.refused(reason)
            case .success(let policy): plan.storagePolicy = policy
            }
            if core.channels.count(bundleID: bundleID) >= core.channels.limit {
                return outcome.refused(.cannotCreateChannelConfig)
            }
        case .read, .delete:
            switch BroadcastRules.checkChannelID(head) {
            case .failure(let reason): return outcome.refused(reason)
            case .success(let id): plan.channelID = id
            }
            if core.channels.channel(plan.channelID!, bundleID: bundleID) == nil {
                return outcome.refused(.channelNotRegistered)
            }
        case .list:
            break
        }
        outcome.other = .management(plan)
        return outcome
    }

    /// What broadcasts and channel management check after the line: the credential, the app against
    /// the credential, and the app's broadcast capability.
    private func checkCallerAndApp(_ head: RequestHead, bundleID: String) -> SimulatorReason? {
        let authorization: RequestAuthorization
        switch authorize(head) {
        case .failure(let reason): return reason
        case .success(let granted): authorization = granted
        }
        if let reason = BroadcastRules.checkApp(bundleID, authorization: authorization) { return reason }
        return core.channels.isBroadcastEnabled(bundleID: bundleID) ? nil : .featureNotEnabled
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

    /// What ``Simulator/connections()`` reports.
    var snapshot: ConnectionSnapshot {
        ConnectionSnapshot(
            id: connectionID, acceptedPushes: acceptedPushes, acceptancesAwaitingAnswer: acceptancesAwaitingAnswer)
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

extension APNsConnectionHandler {
    /// The answer to one request before it is written.
    struct Outcome {
        var deviceToken: String?
        var request: CheckedRequest?
        var reason: SimulatorReason?
        var unregisteredSince: Double?
        /// A broadcast or a channel-management call; `nil` for a device push.
        var other: Other?

        /// What a fault script is looked up by: the device token, or a broadcast's channel.
        var faultTarget: String {
            if let deviceToken { return deviceToken }
            if case .broadcast(let request?) = other { return FaultInjector.channelTarget(request.channelID) }
            return ""
        }

        mutating func refused(_ reason: SimulatorReason) -> Outcome {
            self.reason = reason
            return self
        }
    }

    /// The requests that are not device pushes; the payload is there once the request's checks passed.
    enum Other {
        case broadcast(BroadcastRequest?)
        case management(ManagementPlan?)
    }

    /// A channel-management call that passed its checks: what to do to the registry once answered.
    struct ManagementPlan {
        var bundleID: String
        var call: ManagementCall
        var storagePolicy: ChannelRegistry.StoragePolicy?
        var channelID: String?
    }
}

/// An answer held back by injected latency.
struct DelayedAnswer {
    let response: APNsConnectionHandler.Response
    let streamID: HTTP2StreamID
    let resetAfter: Bool
    let decision: FaultInjector.Decision
}
