import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

extension APNsConnectionHandler {
    /// An answer ready to be written.
    struct Response {
        var status: Int
        var reason: SimulatorReason?
        /// The id answered: `apns-id` for a device push, `apns-request-id` (``namesRequestID``) otherwise.
        var apnsID: String
        var uniqueID: String?
        var timestampMilliseconds: Int64?
        /// Broadcasts and channel management name the id `apns-request-id`.
        var namesRequestID = false
        /// A created channel's id (`apns-channel-id`).
        var channelID: String?
        /// A JSON body of a successful answer (a channel read or list).
        var body: String?

        /// A 200 to a device push (broadcasts and channel management name their id `apns-request-id`).
        var acceptsDevicePush: Bool { reason == nil && !namesRequestID }
    }

    func makeResponse(_ outcome: Outcome, head: RequestHead, stream: PendingStream) -> Response {
        if let other = outcome.other { return makeResponse(outcome, other: other, head: head, stream: stream) }
        // Echo a well-formed apns-id; otherwise (absent or BadMessageId) APNs makes one up.
        let echoed =
            outcome.request?.apnsID
            ?? head.apnsID.flatMap { RequestRules.isCanonicalUUID($0, allowUppercase: true) ? $0 : nil }
        let apnsID = echoed ?? messageIDs.next()
        guard let reason = outcome.reason else {
            let uniqueID = core.configuration.environment == .development ? messageIDs.next() : nil
            let request = outcome.request!
            let connectionID = self.connectionID
            core.observation.answered(
                status: 200,
                reason: nil,
                acceptedPush: AcceptedPush(apnsID: request.apnsID),
                record: NotificationRecord(
                    deviceToken: request.deviceToken,
                    topic: request.topic,
                    pushType: request.pushType?.rawValue,
                    apnsID: apnsID,
                    headers: stream.headers.map { ($0.name, $0.value) },
                    payload: stream.body.map { Array($0.readableBytesView) } ?? [],
                    connectionID: connectionID,
                    receivedAt: core.clock.now()
                )
            )
            return Response(status: 200, apnsID: apnsID, uniqueID: uniqueID)
        }
        core.observation.answered(status: reason.status, reason: reason, record: nil)
        // Apple gives the 410 timestamp in milliseconds since 1970.
        let timestamp = outcome.unregisteredSince.map { Int64(($0 * 1000).rounded()) }
        return Response(status: reason.status, reason: reason, apnsID: apnsID, timestampMilliseconds: timestamp)
    }

    /// The answer to a broadcast or a channel-management call; a successful one takes effect here (the
    /// broadcast is recorded, the registry changed), after faults had their say.
    private func makeResponse(_ outcome: Outcome, other: Other, head: RequestHead, stream: PendingStream) -> Response {
        // Echo a well-formed apns-request-id; otherwise (absent or BadMessageId) make one up.
        let echoed = head.requestID.flatMap {
            RequestRules.isCanonicalUUID($0, allowUppercase: core.configuration.acceptsUppercaseMessageID) ? $0 : nil
        }
        var response = Response(status: 200, apnsID: echoed ?? messageIDs.next(), namesRequestID: true)
        var reason = outcome.reason
        if reason == nil {
            switch other {
            case .broadcast(let request?):
                let uniqueID = messageIDs.next()
                response.uniqueID = uniqueID
                let requestID = response.apnsID
                let connectionID = self.connectionID
                core.observation.broadcastAccepted(
                    channelID: request.channelID,
                    record: BroadcastRecord(
                        bundleID: request.bundleID,
                        channelID: request.channelID,
                        requestID: requestID,
                        uniqueID: uniqueID,
                        pushType: request.pushType,
                        expiration: request.expiration,
                        priority: request.priority,
                        headers: stream.headers.map { ($0.name, $0.value) },
                        payload: stream.body.map { Array($0.readableBytesView) } ?? [],
                        connectionID: connectionID,
                        receivedAt: core.clock.now()
                    )
                )
            case .management(let plan?):
                reason = perform(plan, into: &response)
            case .broadcast(nil), .management(nil):
                // Every refusal sets a reason; a request without one passed its checks.
                reason = .internalServerError
            }
        }
        if let reason {
            response.status = reason.status
            response.reason = reason
            response.uniqueID = nil
            response.channelID = nil
            response.body = nil
        }
        core.observation.answered(status: response.status, reason: reason, record: nil)
        return response
    }

    /// Carries out a channel-management call; the reason when the registry changed in the meantime.
    private func perform(_ plan: ManagementPlan, into response: inout Response) -> SimulatorReason? {
        let channels = core.channels
        switch plan.call {
        case .create:
            do {
                let channel = try channels.create(bundleID: plan.bundleID, storagePolicy: plan.storagePolicy!)
                response.status = 201
                response.channelID = channel.id
            } catch {
                return error
            }
        case .read:
            guard let channel = channels.channel(plan.channelID!, bundleID: plan.bundleID) else {
                return .channelNotRegistered
            }
            response.body =
                #"{"message-storage-policy":\#(channel.storagePolicy.rawValue),"push-type":"LiveActivity"}"#
        case .delete:
            guard channels.delete(plan.channelID!, bundleID: plan.bundleID) else { return .channelNotRegistered }
            response.status = 204
        case .list:
            // Base64 has no character JSON would escape.
            let ids = channels.channels(bundleID: plan.bundleID).map { "\"\($0.id)\"" }
            response.body = #"{"channels":["# + ids.joined(separator: ",") + "]}"
        }
        return nil
    }

    func write(_ response: Response, streamID: HTTP2StreamID, context: ChannelHandlerContext, resetAfter: Bool = false)
    {
        // The storage of the last answer's headers is free again once HTTP/2 has encoded them (a HEADERS
        // frame is never held back), so it is reused instead of allocated per answer.
        var headers = responseHeaders
        responseHeaders = HPACKHeaders()
        headers.removeAll(keepingCapacity: true)
        defer { responseHeaders = headers }
        headers.reserveCapacity(response.reason == nil ? 3 : 4)
        headers.add(name: ":status", value: Self.statusText(response.status))
        // Unique per response: keep them out of the client's HPACK dynamic table.
        headers.add(
            name: response.namesRequestID ? "apns-request-id" : "apns-id", value: response.apnsID,
            indexing: .nonIndexable)
        if let unique = response.uniqueID {
            headers.add(name: "apns-unique-id", value: unique, indexing: .nonIndexable)
        }
        if let channelID = response.channelID {
            headers.add(name: "apns-channel-id", value: channelID, indexing: .nonIndexable)
        }
        core.observation.streamsClosed(1)
        var body: ByteBuffer
        if let reason = response.reason {
            body = context.channel.allocator.buffer(capacity: 64)
            body.writeString("{\"reason\":\"\(reason.rawValue)\"")
            if let timestamp = response.timestampMilliseconds { body.writeString(",\"timestamp\":\(timestamp)") }
            body.writeString("}")
        } else if let text = response.body {
            body = context.channel.allocator.buffer(string: text)
        } else {
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))),
                promise: nil)
            return
        }
        headers.add(name: "content-type", value: "application/json")
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        let last = HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))
        guard resetAfter else {
            context.write(wrapOutboundOut(last), promise: nil)
            return
        }
        // DATA can wait in the flow-control buffer; the reset must not overtake it.
        let written = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(last), promise: written)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        written.futureResult.whenSuccess {
            let rst = HTTP2Frame(streamID: streamID, payload: .rstStream(.noError))
            bound.value.writeAndFlush(NIOAny(rst), promise: nil)
        }
    }

    private static func statusText(_ status: Int) -> String {
        switch status {
        case 200: return "200"
        case 400: return "400"
        case 403: return "403"
        case 429: return "429"
        default: return String(status)
        }
    }

    // MARK: flow control and stream limit

    /// Returns connection-level window as DATA arrives (stream windows never run out: bodies are small
    /// and oversized ones are reset).
    func giveBackWindow(_ bytes: Int) {
        consumedWindow += bytes
        guard consumedWindow >= Self.connectionWindow / 2, let context else { return }
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: consumedWindow))),
            promise: nil)
        consumedWindow = 0
        needsFlush = true
    }

    /// First request with a valid provider token: from one stream to the configured limit.
    func liftRestriction() {
        restricted = false
        advertise(core.maxConcurrentStreams)
    }

    /// Run-time change of the limit (ignored while the connection still waits for a valid token).
    func applyMaxConcurrentStreams(_ value: UInt32) {
        guard !restricted else { return }
        droppedAfterRejection = false
        advertise(value)
        context?.flush()
    }

    func advertise(_ value: UInt32) {
        guard value != advertisedMaxStreams, let context else { return }
        advertisedMaxStreams = value
        let setting = HTTP2Setting(parameter: .maxConcurrentStreams, value: Int(value))
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([setting])))), promise: nil)
        needsFlush = true
    }

    // MARK: GOAWAY, close, idle

    /// GOAWAY with `{"reason": …}`; streams up to the last one received are still answered, then the
    /// connection closes.
    func goAway(reason: SimulatorReason) {
        guard goAwayLastStreamID == nil, let context else { return }
        goAwayLastStreamID = highestStreamID
        var data = context.channel.allocator.buffer(capacity: 32)
        data.writeString("{\"reason\":\"\(reason.rawValue)\"}")
        let frame = HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(lastStreamID: highestStreamID, errorCode: .noError, opaqueData: data)
        )
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        core.observation.goAwaySent()
        // Should a client keep the connection open forever, close it anyway.
        context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(5)) { [weak self] in
            self?.context?.close(promise: nil)
        }
        closeIfDrained()
    }

    func closeIfDrained() {
        guard goAwayLastStreamID != nil, streams.isEmpty, delayedResponses == 0, let context else { return }
        context.flush()
        context.close(promise: nil)
    }

    /// Drops the TCP connection without a word.
    func closeAbruptly() {
        context?.close(promise: nil)
    }

    func checkIdle(timeout: TimeAmount) {
        guard goAwayLastStreamID == nil, streams.isEmpty, delayedResponses == 0 else { return }
        if NIODeadline.now() - lastActivity >= timeout { goAway(reason: .idleTimeout) }
    }
}
