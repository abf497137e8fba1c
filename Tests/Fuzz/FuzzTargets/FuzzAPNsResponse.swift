import APNs

/// The APNs client's reading of an answer (``HeaderLinesInput``: the response headers, an empty line,
/// the DATA): the headers the HTTP/2 handler picks out (`:status` by its digits, `apns-id`,
/// `apns-unique-id`), the error body cut where the handler cuts it, `APNsResponse.parseBody`, then the
/// outcome. The same body is also read as a GOAWAY's debug data. Properties: a reason string read
/// back gives the same string; a 200 is delivered, a 410 unregistered with the body's timestamp.
package enum FuzzAPNsResponse {
    package static func prepare() {}

    /// `APNsHTTP2Stream.maximumResponseBody`.
    static let maximumResponseBody = 16_384

    package static func run(_ data: UnsafeBufferPointer<UInt8>) {
        let input = HeaderLinesInput(data)
        var status: Int?
        var apnsID: String?
        var apnsUniqueID: String?
        for (name, value) in input.headers {
            var value = value
            switch name {
            case ":status": status = value.withUTF8 { APNsResponse.status(digits: UnsafeRawBufferPointer($0)) }
            case "apns-id": apnsID = value
            case "apns-unique-id": apnsUniqueID = value
            default: break
            }
        }
        let body = Array(input.body.prefix(maximumResponseBody))
        let (reason, timestamp) = APNsResponse.parseBody(body)
        if let reason {
            fuzzCheck(APNsReason(reason.rawValue) == reason, "reason \(reason.rawValue) does not read back")
        }
        _ = APNsResponse.parseBody(input.body)  // as GOAWAY debug data: not cut

        guard let status else { return }
        let response = APNsResponse(
            status: status, apnsID: apnsID, apnsUniqueID: apnsUniqueID, reason: reason,
            timestampMilliseconds: timestamp)
        let outcome = APNsOutcome.classify(response)
        switch status {
        case 200: fuzzCheck(outcome == .delivered, "200 classified \(outcome)")
        case 410: fuzzCheck(outcome == .unregistered(timestampMilliseconds: timestamp), "410 classified \(outcome)")
        default: fuzzCheck(outcome != .delivered, "\(status) classified delivered")
        }
    }
}
