import APNsSimulator
import FuzzTargets
import Crypto
import Foundation
import JSONSchema
import NIOCore
import NIOHPACK

/// The APNs simulator's request path and its HPACK literal cache. The first byte picks which:
///
/// - even: a request (``HeaderLinesInput``: header lines, an empty line, the body) through what a
///   connection does with one — the header table (`RequestHead`), the path rules, the provider token
///   (a token-trust connection; bit 1 of the first byte set: an open one), the header rules and the
///   payload syntax check. A path under `/4/` takes the broadcast rules instead, one under `/1/` the
///   channel-management rules (the create body among them). A value `bearer sign:<header JSON>.<claims
///   JSON>` is made into a token signed with the trusted key, so the claims checks after the signature
///   are reached too. Properties: every refusal is a reason of Apple's tables; an accepted request has a
///   lowercase hex token; an accepted broadcast has a well-formed channel id and a priority of 10, 5 or
///   1; a payload the worker's strict parser reads as an object (no BOM, shallow) passes the syntax
///   check.
/// - odd: the bytes after it (behind the client preface unless they start with `PRI `, so that a wrong
///   preface is reached too) through the HPACK literal rewriter, in one
///   piece and in pieces of `(first byte >> 1) + 1` bytes: both must hand on the same bytes, and each
///   rewritten HEADERS block must decode to the headers of the original.
package enum FuzzSimulator {
    /// Makes the trusted key before the first input.
    package static func prepare() {
        _ = verifier
    }

    static let now = 1_700_000_000.0
    static let signingKey = try! P256.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 0x2A, count: 32))
    static let verifier = ProviderTokenVerifier(keys: [
        ProviderTokenKey(
            teamID: "TEAM123456", keyID: "KEY1234567", publicKey: signingKey.publicKey, topics: ["com.example.app"])
    ])

    package static func run(_ data: UnsafeBufferPointer<UInt8>) {
        guard let selector = data.first else { return }
        let rest = UnsafeBufferPointer(rebasing: data[1...])
        if selector & 1 == 0 {
            request(HeaderLinesInput(rest), open: selector & 2 != 0)
        } else {
            rewriter(rest, chunk: Int(selector >> 1) + 1)
        }
    }

    // MARK: the request path

    static func request(_ input: HeaderLinesInput, open: Bool) {
        // As NIOHPACK's decoder makes them: any name (the simulator turns NIOHTTP2's header validation
        // off), which `HPACKHeaders.add` would refuse unless ASCII.
        let headers = HPACKHeaders(
            input.headers.map { ($0.name, $0.value.hasPrefix("bearer sign:") ? signed($0.value) : $0.value) })
        let reason = evaluate(RequestHead(headers), body: input.body, open: open)
        if let reason {
            fuzzCheck(SimulatorReason(named: reason.rawValue) == reason, "a reason outside Apple's table: \(reason)")
        }
    }

    /// What `APNsConnectionHandler` does with a request's head and body, before the registry and faults.
    static func evaluate(_ head: RequestHead, body: [UInt8], open: Bool) -> SimulatorReason? {
        if let path = head.path, path.hasPrefix("/4/") { return evaluateBroadcast(head, body: body, open: open) }
        if let path = head.path, path.hasPrefix("/1/") { return evaluateManagement(head, body: body, open: open) }
        let token: String
        switch RequestRules.checkLine(head) {
        case .failure(let reason): return reason
        case .success(let t): token = t
        }
        fuzzCheck(
            !token.isEmpty && token.utf8.count % 2 == 0
                && token.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) },
            "an accepted device token that is not lowercase hex: \(token)")
        var auth = ConnectionAuthStateMachine(mode: open ? .open : .token, tokenUpdateWindow: 1200)
        let authorization: RequestAuthorization
        switch auth.authorize(header: head.authorization, now: now, verifier: verifier) {
        case .refuse(let reason): return reason
        case .authorized(let granted, _): authorization = granted
        }
        let checked: CheckedRequest
        switch RequestRules.checkHeaders(
            head, deviceToken: token, authorization: authorization, acceptUppercaseMessageID: false)
        {
        case .failure(let reason): return reason
        case .success(let request): checked = request
        }
        let reason = body.withUnsafeBytes {
            RequestRules.checkPayload($0, size: body.count, limit: checked.maximumPayloadSize)
        }
        if reason == nil || reason == .badPayload { checkSyntaxAgainstParser(body, accepted: reason == nil) }
        return reason
    }

    /// A broadcast on the push listener, before the channel registry and faults.
    static func evaluateBroadcast(_ head: RequestHead, body: [UInt8], open: Bool) -> SimulatorReason? {
        let bundleID: String
        switch BroadcastRules.checkBroadcastLine(head) {
        case .failure(let reason): return reason
        case .success(let id): bundleID = id
        }
        var auth = ConnectionAuthStateMachine(mode: open ? .open : .token, tokenUpdateWindow: 1200)
        switch auth.authorize(header: head.authorization, now: now, verifier: verifier) {
        case .refuse(let reason): return reason
        case .authorized(let granted, _):
            if let reason = BroadcastRules.checkApp(bundleID, authorization: granted) { return reason }
        }
        switch BroadcastRules.checkBroadcastHeaders(head, bundleID: bundleID, acceptUppercaseRequestID: false) {
        case .failure(let reason): return reason
        case .success(let request):
            fuzzCheck(
                BroadcastRules.isChannelIDSyntax(request.channelID), "an accepted malformed channel id: \(request)")
            fuzzCheck([10, 5, 1].contains(request.priority), "an accepted priority \(request.priority)")
        }
        return body.withUnsafeBytes {
            RequestRules.checkPayload($0, size: body.count, limit: BroadcastRules.maximumPayloadSize)
        }
    }

    /// A channel-management request, before the channel registry and faults.
    static func evaluateManagement(_ head: RequestHead, body: [UInt8], open: Bool) -> SimulatorReason? {
        let bundleID: String
        let call: ManagementCall
        switch BroadcastRules.checkManagementLine(head) {
        case .failure(let reason): return reason
        case .success(let (id, checked)):
            bundleID = id
            call = checked
        }
        var auth = ConnectionAuthStateMachine(mode: open ? .open : .token, tokenUpdateWindow: 1200)
        switch auth.authorize(header: head.authorization, now: now, verifier: verifier) {
        case .refuse(let reason): return reason
        case .authorized(let granted, _):
            if let reason = BroadcastRules.checkApp(bundleID, authorization: granted) { return reason }
        }
        if let reason = BroadcastRules.checkRequestID(head, acceptUppercase: false) { return reason }
        switch call {
        case .create:
            if case .failure(let reason) = BroadcastRules.checkCreateBody(body) { return reason }
        case .read, .delete:
            if case .failure(let reason) = BroadcastRules.checkChannelID(head) { return reason }
        case .list:
            break
        }
        return nil
    }

    /// The simulator's allocation-free syntax check against the worker's strict parser: an object the
    /// parser reads (it also refuses duplicate names, bad UTF-8 and lone surrogates, which the check
    /// lets through) must pass, unless it starts with a BOM or nests deeper than the check's limit.
    static func checkSyntaxAgainstParser(_ body: [UInt8], accepted: Bool) {
        guard !accepted, !body.starts(with: [0xEF, 0xBB, 0xBF]),
            let value = try? JSONParser.parse(body), value.objectValue != nil, depth(value) < 64
        else { return }
        fuzzCheck(false, "BadPayload for a JSON object: \(String(decoding: body, as: UTF8.self))")
    }

    static func depth(_ value: JSONValue) -> Int {
        switch value {
        case .array(let elements): 1 + (elements.map(depth).max() ?? 0)
        case .object(let object): 1 + (object.values.map(depth).max() ?? 0)
        default: 0
        }
    }

    /// `bearer sign:<header>.<claims>` → `bearer <JWT>` signed with the trusted key.
    static func signed(_ value: String) -> String {
        let text = value.dropFirst("bearer sign:".count)
        guard let dot = text.firstIndex(of: ".") else { return value }
        let signingInput =
            base64URL(Data(text[..<dot].utf8)) + "." + base64URL(Data(text[text.index(after: dot)...].utf8))
        guard let signature = try? signingKey.signature(for: Data(signingInput.utf8)) else { return value }
        return "bearer " + signingInput + "." + base64URL(signature.rawRepresentation)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    // MARK: the HPACK literal cache

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    static func rewriter(_ bytes: UnsafeBufferPointer<UInt8>, chunk: Int) {
        let input = bytes.starts(with: "PRI ".utf8) ? Array(bytes) : preface + Array(bytes)
        let whole = rewrite(input, chunk: input.count)
        let pieces = rewrite(input, chunk: chunk)
        fuzzCheck(whole == pieces, "pieces of \(chunk) bytes hand on other bytes than one piece")
        compareFrames(original: input, rewritten: whole)
    }

    static func rewrite(_ input: [UInt8], chunk: Int) -> [UInt8] {
        var rewriter = HuffmanLiteralRewriter(allocator: ByteBufferAllocator())
        var out: [UInt8] = []
        var i = 0
        while i < input.count {
            var piece = ByteBuffer(bytes: input[i..<min(i + chunk, input.count)])
            let original = piece
            if let handed = rewriter.process(&piece) {
                out += handed.readableBytesView
            } else {
                out += original.readableBytesView
            }
            i += chunk
        }
        return out
    }

    struct Frame {
        var header: ArraySlice<UInt8>
        var payload: ArraySlice<UInt8>
        var type: UInt8 { header[header.startIndex + 3] }
    }

    /// The whole frames after the preface (a trailing partial frame is not counted).
    static func frames(_ bytes: [UInt8]) -> [Frame] {
        var frames: [Frame] = []
        var i = preface.count
        while i + 9 <= bytes.count {
            let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            guard i + 9 + n <= bytes.count else { break }
            frames.append(Frame(header: bytes[i..<i + 9], payload: bytes[i + 9..<i + 9 + n]))
            i += 9 + n
        }
        return frames
    }

    /// Frame by frame: the same frames; a changed one is a HEADERS frame whose block decodes to the
    /// same headers. Checked only while the original blocks decode (after a failure the two decoders'
    /// tables may differ) and frames are within the default maximum size.
    static func compareFrames(original: [UInt8], rewritten: [UInt8]) {
        let before = frames(original)
        let after = frames(rewritten)
        var originalDecoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var rewrittenDecoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for (a, b) in zip(before, after) {
            guard a.payload.count <= 16_384 else { return }
            if a.header.elementsEqual(b.header) && a.payload.elementsEqual(b.payload) {
                guard a.type == 0x1 else { continue }
            } else {
                fuzzCheck(a.type == 0x1, "a frame of type \(a.type) was changed")
                fuzzCheck(
                    a.header.dropFirst(3).elementsEqual(b.header.dropFirst(3)),
                    "a HEADERS frame's type, flags or stream changed")
            }
            guard let block = headerBlock(a), let rewrittenBlock = headerBlock(b) else {
                fuzzCheck(headerBlock(a) == nil, "a rewritten HEADERS frame lost its block")
                return
            }
            var x = ByteBuffer(bytes: block)
            var y = ByteBuffer(bytes: rewrittenBlock)
            guard let expected = try? originalDecoder.decodeHeaders(from: &x) else { return }
            guard let actual = try? rewrittenDecoder.decodeHeaders(from: &y) else {
                fuzzCheck(false, "a rewritten header block does not decode")
                return
            }
            fuzzCheck(
                expected.map { "\($0.name): \($0.value) \($0.indexable)" }
                    == actual.map { "\($0.name): \($0.value) \($0.indexable)" },
                "a rewritten header block decodes to other headers")
        }
    }

    /// A HEADERS frame's header block fragment (without padding and priority); nil when malformed.
    static func headerBlock(_ frame: Frame) -> [UInt8]? {
        let flags = frame.header[frame.header.startIndex + 4]
        var start = frame.payload.startIndex
        var padding = 0
        if flags & 0x8 != 0 {
            guard !frame.payload.isEmpty else { return nil }
            padding = Int(frame.payload[start])
            start += 1
        }
        if flags & 0x20 != 0 { start += 5 }
        let end = frame.payload.endIndex - padding
        guard start <= end else { return nil }
        return Array(frame.payload[start..<end])
    }
}
