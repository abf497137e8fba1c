internal import CNghttp2
import Foundation
import NIOCore

/// What nghttp2 reports while it reads: headers, body bytes, a stream closed, the peer's settings,
/// a GOAWAY. Each runs inside the session's own call, so anything that would re-enter the session
/// is deferred (`raise`).
extension APNsHTTP2Handler {
    // MARK: nghttp2 callbacks

    /// The stream behind an nghttp2 callback's stream data (alive while `streams` holds it).
    private func stream(_ data: UnsafeMutableRawPointer?) -> APNsHTTP2Stream? {
        data.map { Unmanaged<APNsHTTP2Stream>.fromOpaque($0).takeUnretainedValue() }
    }

    func nghttp2Header(
        stream data: UnsafeMutableRawPointer?, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer
    ) {
        guard let stream = stream(data) else { return }
        switch name.count {
        case 7 where name.elementsEqual(":status".utf8):
            stream.status = APNsResponse.status(digits: value)
        case 7 where name.elementsEqual("apns-id".utf8):
            // APNs echoes the apns-id a request carried: keep the request's string, a new one
            // (36 bytes, on the heap) only when the answer names another.
            if let sent = stream.sentAPNsID, sent.utf8.elementsEqual(value) {
                stream.apnsID = sent
            } else {
                stream.apnsID = String(decoding: value, as: UTF8.self)
            }
        case 14 where name.elementsEqual("apns-unique-id".utf8):
            stream.apnsUniqueID = String(decoding: value, as: UTF8.self)
        case 15 where name.elementsEqual("apns-request-id".utf8):
            stream.requestID = String(decoding: value, as: UTF8.self)
        case 15 where name.elementsEqual("apns-channel-id".utf8):
            stream.channelID = String(decoding: value, as: UTF8.self)
        default:
            break
        }
    }

    func nghttp2Data(stream data: UnsafeMutableRawPointer?, bytes: UnsafeRawBufferPointer) {
        guard let stream = stream(data) else { return }
        let room = APNsHTTP2Stream.maximumResponseBody - stream.responseBody.count
        if room > 0 { stream.responseBody.append(contentsOf: bytes.prefix(room)) }
    }

    func nghttp2ReadBody(stream data: UnsafeMutableRawPointer?, into buffer: UnsafeMutableRawBufferPointer)
        -> (count: Int, end: Bool)
    {
        guard let stream = stream(data) else { return (0, true) }
        let payload = stream.request.content.body
        let count = min(buffer.count, payload.count - stream.bodyOffset)
        payload.withUnsafeBytes { source in
            buffer.copyMemory(
                from: UnsafeRawBufferPointer(rebasing: source[stream.bodyOffset..<stream.bodyOffset + count]))
        }
        stream.bodyOffset += count
        return (count, stream.bodyOffset == payload.count)
    }

    func nghttp2StreamClosed(stream data: UnsafeMutableRawPointer?, streamID: Int32, errorCode: UInt32) {
        guard data != nil, let stream = streams.removeValue(forKey: streamID) else { return }
        if let capacity = state.streamClosed(status: stream.status) { raise(.capacityChanged(capacity: capacity)) }
        guard !stream.finished else { return }
        if let status = stream.status {
            let (reason, timestamp) = APNsResponse.parseBody(stream.responseBody)
            raise(
                .succeed(
                    stream,
                    APNsResponse(
                        status: status, apnsID: stream.apnsID, apnsUniqueID: stream.apnsUniqueID, reason: reason,
                        timestampMilliseconds: timestamp, requestID: stream.requestID, channelID: stream.channelID,
                        body: stream.isCustom ? stream.responseBody : [],
                        latency: .nanoseconds((NIODeadline.now() - stream.submittedAt).nanoseconds))))
            return
        }
        let refused = errorCode == NGHTTP2_REFUSED_STREAM.rawValue
        if let last = state.goAwayLastStreamID, streamID > last || refused {
            raise(
                .fail(
                    stream,
                    APNsClientError(
                        .goAway, "stream \(streamID) above GOAWAY's last-stream-id \(last): not processed",
                        mayHaveReachedAPNs: false, goAwayReason: goAwayReason)))
        } else if refused {
            raise(
                .fail(stream, APNsClientError(.streamReset, "REFUSED_STREAM: not processed", mayHaveReachedAPNs: false))
            )
        } else {
            let text = String(cString: nghttp2_http2_strerror(errorCode))
            raise(
                .fail(
                    stream,
                    APNsClientError(.streamReset, "stream closed without an answer (\(text))", mayHaveReachedAPNs: true)
                ))
        }
    }

    func nghttp2Settings(maxConcurrentStreams: UInt32) {
        switch state.receivedSettings(maxConcurrentStreams: maxConcurrentStreams) {
        case .becameReady(let capacity):
            apply(.cancel(.setup))
            raise(.ready(capacity: capacity))
        case .capacityChanged(let capacity): raise(.capacityChanged(capacity: capacity))
        case .none: break
        }
    }

    func nghttp2GoAway(lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8]) {
        let (reason, _) = APNsResponse.parseBody(debugData)
        goAwayReason = reason?.rawValue ?? (errorCode == 0 ? nil : String(cString: nghttp2_http2_strerror(errorCode)))
        guard case .drain = state.receivedGoAway(lastStreamID: lastStreamID) else { return }
        let error = APNsClientError(
            .goAway, "connection going away; request not sent", mayHaveReachedAPNs: false,
            goAwayReason: goAwayReason)
        while let stream = waiting.popFirst() { raise(.fail(stream, error)) }
        raise(.goingAway(reason: goAwayReason))
    }
}
