import APNsSimulator
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A deliberately low-level HTTP/2 client for the tests: frames go out exactly as written (header
/// validation off, so duplicate or missing pseudo-headers and odd methods reach the server), and every
/// frame that comes back is kept for the test to read.
final class RawHTTP2Client: Sendable {
    let channel: any Channel
    private let frames: NIOLockedValueBox<[HTTP2Frame]>
    private let closed: NIOLockedValueBox<Bool>

    private init(channel: any Channel, frames: NIOLockedValueBox<[HTTP2Frame]>, closed: NIOLockedValueBox<Bool>) {
        self.channel = channel
        self.frames = frames
        self.closed = closed
    }

    /// Connects over TLS (ALPN h2, trusting `caPath`), optionally with a client certificate.
    static func connect(
        group: any EventLoopGroup,
        port: Int,
        caPath: String,
        clientCertificate: IssuedCertificate? = nil,
        alpn: [String] = ["h2"]
    ) async throws -> RawHTTP2Client {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(caPath)
        tls.applicationProtocols = alpn
        if let clientCertificate {
            tls.certificateChain = [
                .certificate(try NIOSSLCertificate(bytes: Array(clientCertificate.certificatePEM.utf8), format: .pem))
            ]
            tls.privateKey = .privateKey(
                try NIOSSLPrivateKey(bytes: Array(clientCertificate.privateKeyPEM.utf8), format: .pem))
        }
        let context = try NIOSSLContext(configuration: tls)
        let frames = NIOLockedValueBox<[HTTP2Frame]>([])
        let closed = NIOLockedValueBox(false)
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: context, serverHostname: "localhost"))
                    try sync.addHandler(
                        NIOHTTP2Handler(
                            mode: .client, headerBlockValidation: .disabled, contentLengthValidation: .disabled))
                    try sync.addHandler(FrameCollector(frames: frames, closed: closed))
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawHTTP2Client(channel: channel, frames: frames, closed: closed)
    }

    /// Sends a request on `stream` (odd, increasing) with the headers in this order, and the body.
    func send(stream: Int, headers: [(String, String)], body: String? = Fixture.payload) {
        var block = HPACKHeaders()
        for (name, value) in headers { block.add(name: name, value: value) }
        let id = HTTP2StreamID(stream)
        channel.write(
            HTTP2Frame(streamID: id, payload: .headers(.init(headers: block, endStream: body == nil))), promise: nil)
        if let body {
            var buffer = channel.allocator.buffer(capacity: body.utf8.count)
            buffer.writeString(body)
            channel.write(
                HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(buffer), endStream: true))),
                promise: nil)
        }
        channel.flush()
    }

    /// The standard APNs request headers for `token`, with `extra` appended.
    static func apnsHeaders(token: String = Fixture.device, authorization: String?, extra: [(String, String)] = [])
        -> [(String, String)]
    {
        var headers = [
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + token), (":authority", "localhost"),
            ("apns-topic", Fixture.topic), ("apns-push-type", "alert"),
        ]
        if let authorization { headers.append(("authorization", authorization)) }
        return headers + extra
    }

    /// Waits for the complete answer on `stream`.
    func response(stream: Int, timeout: Double = 10) async throws -> RawResponse {
        let id = HTTP2StreamID(stream)
        var answer: RawResponse?
        _ = try await eventually(timeout: timeout) {
            answer = RawResponse(frames: frames.withLockedValue { $0 }.filter { $0.streamID == id })
            return answer != nil
        }
        guard let answer else { throw RawClientError.noResponse(stream) }
        return answer
    }

    /// All frames received so far.
    var received: [HTTP2Frame] { frames.withLockedValue { $0 } }

    /// The latest SETTINGS_MAX_CONCURRENT_STREAMS the server advertised.
    var maxConcurrentStreams: Int? {
        var value: Int?
        for frame in received {
            if case .settings(.settings(let settings)) = frame.payload {
                for s in settings where s.parameter == .maxConcurrentStreams { value = s.value }
            }
        }
        return value
    }

    var goAway: (lastStreamID: HTTP2StreamID, code: HTTP2ErrorCode, reason: String?)? {
        for frame in received {
            if case .goAway(let last, let code, let data) = frame.payload {
                return (last, code, data.map { String(buffer: $0) })
            }
        }
        return nil
    }

    var isClosed: Bool { closed.withLockedValue { $0 } }

    func close() async {
        try? await channel.close()
    }
}

enum RawClientError: Error {
    case noResponse(Int)
}

/// One answer assembled from its frames.
struct RawResponse {
    var status: Int
    var headers: HPACKHeaders
    var body: String

    init?(frames: [HTTP2Frame]) {
        var headers: HPACKHeaders?
        var body = ""
        var ended = false
        for frame in frames {
            switch frame.payload {
            case .headers(let h):
                headers = headers ?? h.headers
                ended = ended || h.endStream
            case .data(let d):
                if case .byteBuffer(let b) = d.data { body += String(buffer: b) }
                ended = ended || d.endStream
            default: break
            }
        }
        guard ended, let headers, let status = headers.first(name: ":status").flatMap({ Int($0) }) else { return nil }
        self.status = status
        self.headers = headers
        self.body = body
    }

    var reason: String? { NghttpAnswer.capture(#""reason":"([A-Za-z]+)""#, body) }
}

private final class FrameCollector: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    let frames: NIOLockedValueBox<[HTTP2Frame]>
    let closed: NIOLockedValueBox<Bool>

    init(frames: NIOLockedValueBox<[HTTP2Frame]>, closed: NIOLockedValueBox<Bool>) {
        self.frames = frames
        self.closed = closed
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        frames.withLockedValue { $0.append(frame) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed.withLockedValue { $0 = true }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
