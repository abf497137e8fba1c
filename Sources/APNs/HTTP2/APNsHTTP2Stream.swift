import NIOCore
import Threading

/// One notification on its way through a connection: its request and the answer as it arrives
/// (stream ID, headers, body), the mutable state the request itself does not hold.
/// Lives on the connection's event loop. Its deadline is watched by the handler's one deadline
/// timer, not a timer of its own.
final class APNsHTTP2Stream {
    let request: APNsHTTP2Request
    /// Set once submitted to nghttp2.
    var streamID: Int32?
    var bodyOffset = 0
    var status: Int?
    var apnsID: String?
    var apnsUniqueID: String?
    /// `apns-request-id` and `apns-channel-id`: broadcast and channel-management answers.
    var requestID: String?
    var channelID: String?
    var responseBody: [UInt8] = []
    var submittedAt: NIODeadline = .now()
    /// The completion has run (the stream may still be open in nghttp2, e.g. after a deadline).
    var finished = false

    init(request: APNsHTTP2Request) {
        self.request = request
    }

    /// The apns-id the request carries, if any.
    var sentAPNsID: String? {
        if case .notification(let notification) = request.content { return notification.apnsID?.uuidString }
        return nil
    }

    /// A broadcast or channel-management request, whose answer's body is handed back whole.
    var isCustom: Bool {
        if case .custom = request.content { return true }
        return false
    }

    /// Answers larger than this are cut: an APNs error body is a few dozen bytes.
    static let maximumResponseBody = 16_384

    func succeed(_ response: APNsResponse) {
        guard !finished else { return }
        finished = true
        request.complete(.success(response))
    }

    func fail(_ error: APNsClientError) {
        guard !finished else { return }
        finished = true
        request.complete(.failure(error))
    }
}

/// A notification handed to a connection, with everything the HTTP/2 layer needs to send it.
///
/// Not the pool's `Request`: the HTTP/2 layer is used without a pool too (a callback), and owns
/// the answer's way back (to the pool, with the connection that answered) and its home thread.
///
/// A class, not a struct: it passes through the connection's batch, the handler's queue and its stream,
/// and copying a notification's dozen references at each step cost more than one allocation.
final class APNsHTTP2Request: Sendable {
    let content: APNsRequestContent
    /// Where the provider token comes from with token authentication (the connection picks its own:
    /// `APNsHeaderEncoder`); `nil` with certificate authentication.
    let tokens: APNsTokenAuthenticator?
    /// The deadline of the whole request; past it the stream is cancelled.
    let deadline: NIODeadline
    private let answer: Answer
    /// The bin of the thread that made it, if that thread empties its bin (a worker's reader does):
    /// its content was allocated there, and its last reference is dropped there once answered
    /// (`HomeRelease`). Otherwise the event loop frees it, and under load a free on one thread of
    /// what another allocated meets that thread on its allocator's lock.
    private let home = HomeRelease.attendedHere

    /// Where the answer goes, exactly once, on the connection's event loop: the answer, or why there
    /// is none. A callback rather than a promise: at tens of thousands of requests a second, a
    /// promise and its future's callback list per request are a measurable share of the client's
    /// CPU. A pool's request goes back to its pool without a closure made for it.
    enum Answer: Sendable {
        case callback(@Sendable (Result<APNsResponse, APNsClientError>) -> Void)
        case pool(APNsConnectionPool, APNsConnectionPool.Request, connectionID: Int)
    }

    convenience init(
        content: APNsRequestContent, tokens: APNsTokenAuthenticator?, deadline: NIODeadline,
        completion: @escaping @Sendable (Result<APNsResponse, APNsClientError>) -> Void
    ) {
        self.init(content: content, tokens: tokens, deadline: deadline, answer: .callback(completion))
    }

    init(content: APNsRequestContent, tokens: APNsTokenAuthenticator?, deadline: NIODeadline, answer: Answer) {
        self.content = content
        self.tokens = tokens
        self.deadline = deadline
        self.answer = answer
    }

    /// Hands the answer on (call exactly once), then a reference to the thread that made it, if
    /// it empties its bin: the stream and the handler drop theirs on the event loop soon after, so
    /// the last one is nearly always released there.
    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        switch answer {
        case .callback(let completion): completion(result)
        case .pool(let pool, let request, let connectionID): pool.answered(request, result, connectionID: connectionID)
        }
        home?.put(Unmanaged.passRetained(self))
    }
}

/// What a request carries: a notification to a device, or another request of Apple's provider API
/// (a broadcast to a channel, a channel-management call), given by method, path and headers.
enum APNsRequestContent: Sendable {
    case notification(APNsNotification)
    case custom(APNsCustomRequest)

    var body: [UInt8] {
        switch self {
        case .notification(let notification): notification.payload
        case .custom(let request): request.body
        }
    }
}

/// A request by its parts; the client adds `:scheme`, `:authority` and `authorization`.
struct APNsCustomRequest: Sendable {
    var method: String
    var path: String
    var headers: [(name: String, value: String)]
    var body: [UInt8]
}

/// Builds request headers the way Apple's HPACK guidance asks, per connection; and keeps the
/// connection's provider token: the one it first used, until the schedule says to take the newest
/// (`APNsTokenAuthenticator.token(forConnection:)`). APNs judges token changes per connection.
struct APNsHeaderEncoder {
    let authority: String
    /// The token this connection has used so far, and since when (token authentication).
    private(set) var token: APNsTokenBinding?
    /// Whether apns-id, apns-expiration and apns-collapse-id have been sent once with incremental
    /// indexing on this connection: later values go as literals without indexing.
    private var indexedID = false
    private var indexedExpiration = false
    private var indexedCollapseID = false

    init(authority: String) {
        self.authority = authority
    }

    /// Writes the request's headers into `block` (emptied first; its storage is reused from one
    /// request to the next, so encoding allocates nothing).
    mutating func encode(_ request: APNsHTTP2Request, into block: inout Nghttp2HeaderBlock) {
        let notification: APNsNotification
        switch request.content {
        case .notification(let value): notification = value
        case .custom(let custom):
            encode(custom, token: token(for: request), into: &block)
            return
        }
        block.removeAll()
        block.append(":method", "POST")
        block.append(":scheme", "https")
        block.append(":authority", authority)
        // Not flagged: nghttp2 then sends :path as a literal without indexing, the form Apple asks
        // for (flagged, it would be never indexed). authorization is never indexed either way.
        block.append(":path", neverIndex: false) { bytes in
            bytes.append(contentsOf: "/3/device/".utf8)
            bytes.append(contentsOf: notification.deviceToken.hex.utf8)
        }
        block.append("apns-topic", notification.topic)
        block.append("apns-push-type", notification.pushType.rawValue)
        if let priority = notification.headerPriority {
            block.append("apns-priority", neverIndex: false) { $0.appendDecimal(Int64(priority.rawValue)) }
        }
        if let expiration = notification.expiration {
            block.append("apns-expiration", neverIndex: indexedExpiration) {
                $0.appendDecimal(expiration.secondsSince1970)
            }
            indexedExpiration = true
        }
        if let collapseID = notification.collapseID {
            block.append("apns-collapse-id", collapseID, neverIndex: indexedCollapseID)
            indexedCollapseID = true
        }
        if let apnsID = notification.apnsID {
            block.append("apns-id", apnsID.uuidString, neverIndex: indexedID)
            indexedID = true
        }
        if let token = token(for: request) {
            block.append("authorization", neverIndex: true) { bytes in
                bytes.append(contentsOf: "bearer ".utf8)
                bytes.append(contentsOf: token.jwt.utf8)
            }
        }
    }

    /// This connection's token for `request`, if it uses token authentication.
    private mutating func token(for request: APNsHTTP2Request) -> APNsProviderToken? {
        request.tokens?.token(forConnection: &token)
    }

    /// A broadcast or channel-management request: its own method, path and headers (ids never
    /// indexed: each is used once).
    private func encode(_ request: APNsCustomRequest, token: APNsProviderToken?, into block: inout Nghttp2HeaderBlock) {
        block.removeAll()
        block.append(dynamicName: ":method", request.method)
        block.append(":scheme", "https")
        block.append(":authority", authority)
        block.append(":path", request.path)
        for (name, value) in request.headers {
            block.append(dynamicName: name, value, neverIndex: name.hasSuffix("-id"))
        }
        if let token {
            block.append("authorization", neverIndex: true) { bytes in
                bytes.append(contentsOf: "bearer ".utf8)
                bytes.append(contentsOf: token.jwt.utf8)
            }
        }
    }

    /// The headers as (name, value, never indexed), for tests.
    mutating func headers(for request: APNsHTTP2Request) -> [Nghttp2Header] {
        var block = Nghttp2HeaderBlock()
        encode(request, into: &block)
        return block.headers
    }
}

extension [UInt8] {
    /// Appends `value` in decimal ASCII.
    mutating func appendDecimal(_ value: Int64) {
        if value < 0 { append(UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var divisor: UInt64 = 1
        while divisor <= magnitude / 10 { divisor *= 10 }
        while divisor > 0 {
            append(UInt8(ascii: "0") + UInt8(magnitude / divisor % 10))
            divisor /= 10
        }
    }
}
