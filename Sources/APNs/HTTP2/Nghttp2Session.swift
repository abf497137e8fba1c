internal import CNghttp2
import NIOCore

/// What an nghttp2 client session reports while it parses the server's frames.
///
/// `stream` is the `streamData` given to `submitRequest` for that stream (nil for a stream this
/// client did not open).
protocol Nghttp2SessionDelegate: AnyObject {
    func nghttp2Header(stream: UnsafeMutableRawPointer?, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
    func nghttp2Data(stream: UnsafeMutableRawPointer?, bytes: UnsafeRawBufferPointer)
    func nghttp2StreamClosed(stream: UnsafeMutableRawPointer?, streamID: Int32, errorCode: UInt32)
    func nghttp2Settings(maxConcurrentStreams: UInt32)
    func nghttp2GoAway(lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8])
    func nghttp2PingAcknowledged()
    /// Copies the next part of a request body into `buffer`; returns the count and whether it was the end.
    func nghttp2ReadBody(stream: UnsafeMutableRawPointer?, into buffer: UnsafeMutableRawBufferPointer)
        -> (count: Int, end: Bool)
}

/// One header of a request and how HPACK should encode it.
struct Nghttp2Header: Equatable {
    var name: String
    var value: String
    /// `NGHTTP2_NV_FLAG_NO_INDEX`: a literal never added to the dynamic table (and never indexed by
    /// intermediaries either).
    var neverIndex: Bool
}

/// A request's headers as one byte buffer and their spans in it: what `nghttp2_submit_request`
/// needs, built without a `String` or an array per header. Reused from request to request.
struct Nghttp2HeaderBlock {
    struct Field {
        var nameStart: Int
        var nameCount: Int
        var valueStart: Int
        var valueCount: Int
        var neverIndex: Bool
    }

    private(set) var bytes: [UInt8] = []
    private(set) var fields: [Field] = []

    init() {
        bytes.reserveCapacity(512)
        fields.reserveCapacity(12)
    }

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
    }

    mutating func append(_ name: StaticString, _ value: String, neverIndex: Bool = false) {
        append(name, neverIndex: neverIndex) { $0.append(contentsOf: value.utf8) }
    }

    /// A header whose value `writeValue` appends to the buffer.
    mutating func append(_ name: StaticString, neverIndex: Bool, _ writeValue: (inout [UInt8]) -> Void) {
        let nameStart = bytes.count
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        let valueStart = bytes.count
        writeValue(&bytes)
        fields.append(
            Field(
                nameStart: nameStart, nameCount: valueStart - nameStart, valueStart: valueStart,
                valueCount: bytes.count - valueStart, neverIndex: neverIndex))
    }

    /// A header whose name is only known at run time (custom requests).
    mutating func append(dynamicName name: String, _ value: String, neverIndex: Bool = false) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name.utf8)
        let valueStart = bytes.count
        bytes.append(contentsOf: value.utf8)
        fields.append(
            Field(
                nameStart: nameStart, nameCount: valueStart - nameStart, valueStart: valueStart,
                valueCount: bytes.count - valueStart, neverIndex: neverIndex))
    }

    var headers: [Nghttp2Header] {
        fields.map { field in
            Nghttp2Header(
                name: String(decoding: bytes[field.nameStart..<field.nameStart + field.nameCount], as: UTF8.self),
                value: String(decoding: bytes[field.valueStart..<field.valueStart + field.valueCount], as: UTF8.self),
                neverIndex: field.neverIndex)
        }
    }
}

/// An nghttp2 client session (`nghttp2_session`), used through `mem_recv`/`mem_send`: nghttp2 never
/// touches a socket. Freed in `deinit`.
///
/// The C callbacks get this object as `user_data`, unretained: the session is owned by this object
/// and deleted in its `deinit`, so no callback can run after it is gone. Event-loop-only.
final class Nghttp2Session {
    private var session: OpaquePointer?
    /// Unowned, not weak: the delegate (the connection's handler) owns this session and deletes it
    /// when it goes (`handlerRemoved`), so the delegate outlives every callback. A weak load per
    /// callback was a visible share of the client's CPU.
    unowned(unsafe) let delegate: any Nghttp2SessionDelegate
    /// Reused by every `submitRequest`.
    private var nameValues: [nghttp2_nv] = []

    init(delegate: any Nghttp2SessionDelegate) throws {
        self.delegate = delegate
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw APNsClientError(.protocolError, "nghttp2_session_callbacks_new failed", mayHaveReachedAPNs: false)
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)

        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else {
            throw APNsClientError(.protocolError, "nghttp2_option_new failed", mayHaveReachedAPNs: false)
        }
        defer { nghttp2_option_del(option) }
        // Closed streams are never referenced again: do not keep them for priority bookkeeping.
        nghttp2_option_set_no_closed_streams(option, 1)

        var session: OpaquePointer?
        let status = nghttp2_session_client_new2(&session, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        guard status == 0, let session else {
            throw APNsClientError(.protocolError, "nghttp2_session_client_new2 failed", mayHaveReachedAPNs: false)
        }
        self.session = session
        // The connection preface's SETTINGS: no server push, a 1 MiB stream window for answers.
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
        ]
        guard nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count) == 0 else {
            throw APNsClientError(.protocolError, "nghttp2_submit_settings failed", mayHaveReachedAPNs: false)
        }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Feeds bytes from the server; callbacks run during the call. Returns nghttp2's error text on failure.
    func receive(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let session else { return "session closed" }
        let consumed = nghttp2_session_mem_recv(session, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
        return consumed < 0 ? String(cString: nghttp2_strerror(Int32(consumed))) : nil
    }

    /// Serialises every frame nghttp2 has ready into `buffer`.
    func send(into buffer: inout ByteBuffer) -> String? {
        guard let session else { return "session closed" }
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 { return String(cString: nghttp2_strerror(Int32(count))) }
            guard count > 0, let data else { return nil }
            buffer.writeBytes(UnsafeRawBufferPointer(start: data, count: count))
        }
    }

    /// Queues a request; nghttp2 copies the headers. `streamData` is handed back to the callbacks
    /// of this stream (see `Nghttp2SessionDelegate`); the caller keeps it alive until the stream
    /// closes. Returns the stream id, or a negative nghttp2 error.
    /// `hasBody`: false sends the HEADERS frame with END_STREAM (a GET or DELETE).
    func submitRequest(_ block: Nghttp2HeaderBlock, streamData: UnsafeMutableRawPointer?, hasBody: Bool = true) -> Int32
    {
        guard let session else { return Int32(NGHTTP2_ERR_INVALID_STATE.rawValue) }
        return block.bytes.withUnsafeBufferPointer { storage -> Int32 in
            let base = UnsafeMutablePointer(mutating: storage.baseAddress!)
            nameValues.removeAll(keepingCapacity: true)
            for field in block.fields {
                let flags = UInt8(field.neverIndex ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : NGHTTP2_NV_FLAG_NONE.rawValue)
                nameValues.append(
                    nghttp2_nv(
                        name: base + field.nameStart, value: base + field.valueStart, namelen: field.nameCount,
                        valuelen: field.valueCount, flags: flags))
            }
            guard hasBody else {
                return nghttp2_submit_request(session, nil, nameValues, nameValues.count, nil, streamData)
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: streamData), read_callback: readBody)
            return nghttp2_submit_request(session, nil, nameValues, nameValues.count, &provider, streamData)
        }
    }

    func submitPing() {
        guard let session else { return }
        _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    }

    func resetStream(_ streamID: Int32, errorCode: UInt32 = NGHTTP2_CANCEL.rawValue) {
        guard let session else { return }
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
    }

    /// Queues GOAWAY(NO_ERROR): the server finishes nothing new, we close once it is written.
    func terminate() {
        guard let session else { return }
        _ = nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
    }

    /// Whether nghttp2 still expects to read or write anything (false after both sides' GOAWAY with no streams).
    var isAlive: Bool {
        guard let session else { return false }
        return nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    var remoteMaxConcurrentStreams: UInt32 {
        guard let session else { return 0 }
        return nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
    }
}

// MARK: - C callbacks (free functions; user_data is the unretained Nghttp2Session)

private func owner(_ userData: UnsafeMutableRawPointer?) -> Nghttp2Session {
    Unmanaged<Nghttp2Session>.fromOpaque(userData!).takeUnretainedValue()
}

private func onHeader(
    _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?, _ nameLength: Int,
    _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    owner(userData).delegate.nghttp2Header(
        stream: nghttp2_session_get_stream_user_data(session, frame.pointee.hd.stream_id),
        name: UnsafeRawBufferPointer(start: name, count: nameLength),
        value: UnsafeRawBufferPointer(start: value, count: valueLength))
    return 0
}

private func onDataChunk(
    _ session: OpaquePointer?, _ flags: UInt8, _ streamID: Int32, _ data: UnsafePointer<UInt8>?, _ length: Int,
    _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    owner(userData).delegate.nghttp2Data(
        stream: nghttp2_session_get_stream_user_data(session, streamID),
        bytes: UnsafeRawBufferPointer(start: data, count: length))
    return 0
}

private func onStreamClose(
    _ session: OpaquePointer?, _ streamID: Int32, _ errorCode: UInt32, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    owner(userData).delegate.nghttp2StreamClosed(
        stream: nghttp2_session_get_stream_user_data(session, streamID), streamID: streamID, errorCode: errorCode)
    return 0
}

private func onFrameReceived(
    _ session: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let frame, let session else { return 0 }
    let owner = owner(userData)
    let header = frame.pointee.hd
    switch UInt32(header.type) {
    case NGHTTP2_SETTINGS.rawValue where header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
        owner.delegate.nghttp2Settings(
            maxConcurrentStreams: nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    case NGHTTP2_GOAWAY.rawValue:
        let goAway = frame.pointee.goaway
        let debug =
            goAway.opaque_data.map { Array(UnsafeBufferPointer(start: $0, count: min(goAway.opaque_data_len, 4096))) }
            ?? []
        owner.delegate.nghttp2GoAway(
            lastStreamID: goAway.last_stream_id, errorCode: goAway.error_code, debugData: debug)
    case NGHTTP2_PING.rawValue where header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
        owner.delegate.nghttp2PingAcknowledged()
    default:
        break
    }
    return 0
}

private func readBody(
    _ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
    _ dataFlags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int {
    let (count, end) = owner(userData).delegate.nghttp2ReadBody(
        stream: source?.pointee.ptr, into: UnsafeMutableRawBufferPointer(start: buffer, count: length))
    if end { dataFlags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
    return count
}
