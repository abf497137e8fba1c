import NIOCore

/// One notification on its way through a connection: its request and the answer as it arrives.
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
    var responseBody: [UInt8] = []
    var submittedAt: NIODeadline = .now()
    /// The completion has run (the stream may still be open in nghttp2, e.g. after a deadline).
    var finished = false

    init(request: APNsHTTP2Request) {
        self.request = request
    }

    /// Answers larger than this are cut: an APNs error body is a few dozen bytes.
    static let maximumResponseBody = 16_384

    func succeed(_ response: APNsResponse) {
        guard !finished else { return }
        finished = true
        request.completion(.success(response))
    }

    func fail(_ error: APNsClientError) {
        guard !finished else { return }
        finished = true
        request.completion(.failure(error))
    }
}

/// A notification handed to a connection, with everything the HTTP/2 layer needs to send it.
struct APNsHTTP2Request: Sendable {
    var notification: APNsNotification
    /// The provider token for token authentication; `nil` with certificate authentication.
    var token: APNsProviderToken?
    /// The deadline of the whole request; past it the stream is cancelled.
    var deadline: NIODeadline
    /// Runs exactly once, on the connection's event loop: the answer, or why there is none. A
    /// callback rather than a promise: at tens of thousands of requests a second, a promise and its
    /// future's callback list per request are a measurable share of the client's CPU.
    var completion: @Sendable (Result<APNsResponse, APNsClientError>) -> Void
}

/// Builds request headers the way Apple's HPACK guidance asks, per connection.
struct APNsHeaderEncoder {
    let authority: String
    /// Names of the per-request headers (apns-id, apns-expiration, apns-collapse-id) already sent once
    /// with incremental indexing on this connection: later values go as literals without indexing.
    private var indexedOnce: Set<String> = []

    init(authority: String) {
        self.authority = authority
    }

    mutating func headers(for request: APNsHTTP2Request) -> [Nghttp2Header] {
        let notification = request.notification
        var headers: [Nghttp2Header] = [
            Nghttp2Header(name: ":method", value: "POST", neverIndex: false),
            Nghttp2Header(name: ":scheme", value: "https", neverIndex: false),
            Nghttp2Header(name: ":authority", value: authority, neverIndex: false),
            Nghttp2Header(name: ":path", value: notification.deviceToken.path, neverIndex: true),
            Nghttp2Header(name: "apns-topic", value: notification.topic, neverIndex: false),
            Nghttp2Header(name: "apns-push-type", value: notification.pushType.rawValue, neverIndex: false),
        ]
        if let priority = notification.headerPriority {
            headers.append(Nghttp2Header(name: "apns-priority", value: String(priority.rawValue), neverIndex: false))
        }
        if let expiration = notification.expiration {
            headers.append(onceIndexed("apns-expiration", String(expiration.secondsSince1970)))
        }
        if let collapseID = notification.collapseID {
            headers.append(onceIndexed("apns-collapse-id", collapseID))
        }
        if let apnsID = notification.apnsID {
            headers.append(onceIndexed("apns-id", apnsID.uuidString))
        }
        if let token = request.token {
            headers.append(Nghttp2Header(name: "authorization", value: token.authorization, neverIndex: true))
        }
        return headers
    }

    private mutating func onceIndexed(_ name: String, _ value: String) -> Nghttp2Header {
        let first = indexedOnce.insert(name).inserted
        return Nghttp2Header(name: name, value: value, neverIndex: !first)
    }
}
