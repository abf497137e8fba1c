import NIOHTTP1
import Prometheus

/// What the operations endpoint answers, as a pure function of the request line: the HTTP
/// plumbing (`OperationsHTTPHandler`) stays apart and this is testable without sockets.
struct OperationsRouter: Sendable {
    struct Response {
        var status: HTTPResponseStatus
        var contentType: String
        var body: [UInt8]
        var extraHeaders: [(String, String)] = []
    }

    let health: HealthState
    let registry: PrometheusCollectorRegistry
    /// Sets the gauges sampled at scrape time.
    var beforeScrape: @Sendable () -> Void = {}

    static let prometheusContentType = "text/plain; version=0.0.4; charset=utf-8"
    static let jsonContentType = "application/json"

    func respond(method: HTTPMethod, uri: String) -> Response {
        let path =
            uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
        let route: (() -> Response)?
        switch path {
        case "/metrics":
            route = {
                beforeScrape()
                var body = WorkerMetrics.withHelpLines(registry.emitToBuffer())
                if let sample = ProcessMetrics.sample() {
                    if let last = body.last, last != UInt8(ascii: "\n") { body.append(UInt8(ascii: "\n")) }
                    body += Array(ProcessMetrics.text(sample).utf8)
                }
                return Response(status: .ok, contentType: Self.prometheusContentType, body: body)
            }
        case "/health/live": route = live
        case "/health/ready": route = ready
        default: route = nil
        }
        guard let route else {
            return Response(
                status: .notFound, contentType: Self.jsonContentType, body: Array(#"{"status":"not found"}"#.utf8))
        }
        guard method == .GET || method == .HEAD else {
            return Response(
                status: .methodNotAllowed, contentType: Self.jsonContentType,
                body: Array(#"{"status":"method not allowed"}"#.utf8), extraHeaders: [("Allow", "GET, HEAD")])
        }
        return route()
    }

    private func live() -> Response {
        health.isLive
            ? Response(status: .ok, contentType: Self.jsonContentType, body: Array(#"{"status":"ok"}"#.utf8))
            : Response(
                status: .serviceUnavailable, contentType: Self.jsonContentType,
                body: Array(#"{"status":"stalled"}"#.utf8))
    }

    private func ready() -> Response {
        let readiness = health.readiness
        let body =
            #"{"status":"\#(readiness.isReady ? "ok" : "unready")","checks":{"kafka":"\#(JSONText.escape(readiness.kafka))","credentials":"\#(JSONText.escape(readiness.credentials))","credentialFiles":"\#(JSONText.escape(readiness.credentialFiles))"}}"#
        return Response(
            status: readiness.isReady ? .ok : .serviceUnavailable, contentType: Self.jsonContentType,
            body: Array(body.utf8))
    }
}
