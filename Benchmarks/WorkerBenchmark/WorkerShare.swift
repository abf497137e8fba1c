import Foundation

/// The worker's own share of an event's latency, as an operator sees it: the histogram
/// `apns_worker_event_duration_seconds` (from the pipeline taking the event up to its result
/// acknowledged by Kafka) scraped from the worker's `/metrics` before and after a step of the open
/// loop. The difference of the two scrapes is the step's events alone; a quantile of it is estimated
/// as Prometheus's `histogram_quantile` does, linearly within the bucket it falls in, so its
/// resolution is the bucket (1, 2, 5, 10, 25, 50, 100 ms…). The mean (sum over count) and the share
/// at or under a bucket's bound are exact.
struct WorkerShare: Sendable {
    static let metric = "apns_worker_event_duration_seconds"

    /// Cumulative counts by upper bound in seconds (the last is +Inf), summed over any labels.
    var buckets: [(bound: Double, count: Double)] = []
    var sum = 0.0
    var count = 0.0

    /// `/metrics` of the operations endpoint on 127.0.0.1:`port`, or nil when it did not answer.
    static func scrape(port: Int) -> WorkerShare? {
        guard let text = httpGet(port: port, path: "/metrics") else { return nil }
        var share = WorkerShare()
        var byBound: [Double: Double] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix(metric) {
            let name = line.prefix { $0 != "{" && $0 != " " }
            guard let value = Double(line.split(separator: " ").last ?? "") else { continue }
            switch name.dropFirst(metric.count) {
            case "_bucket":
                guard let at = line.range(of: "le=\""), let end = line[at.upperBound...].firstIndex(of: "\"") else {
                    continue
                }
                let label = line[at.upperBound..<end]
                let bound = label == "+Inf" ? Double.infinity : Double(label) ?? .nan
                byBound[bound, default: 0] += value
            case "_sum": share.sum += value
            case "_count": share.count += value
            default: break
            }
        }
        share.buckets = byBound.sorted { $0.key < $1.key }.map { (bound: $0.key, count: $0.value) }
        return share
    }

    /// What was recorded between `earlier` and this scrape.
    func since(_ earlier: WorkerShare) -> WorkerShare {
        var difference = WorkerShare(sum: sum - earlier.sum, count: count - earlier.count)
        difference.buckets = buckets.map { bucket in
            let before = earlier.buckets.first { $0.bound == bucket.bound }?.count ?? 0
            return (bound: bucket.bound, count: bucket.count - before)
        }
        return difference
    }

    /// The `q` quantile in milliseconds, interpolated within its bucket (from the bucket below's bound,
    /// or 0); in the +Inf bucket, the highest finite bound. NaN without events.
    func quantileMilliseconds(_ q: Double) -> Double {
        guard let total = buckets.last?.count, total > 0 else { return .nan }
        let rank = q * total
        var lower = 0.0
        var below = 0.0
        for bucket in buckets {
            if bucket.count >= rank {
                guard bucket.bound.isFinite else { return lower * 1000 }
                let inBucket = bucket.count - below
                let fraction = inBucket > 0 ? (rank - below) / inBucket : 1
                return (lower + (bucket.bound - lower) * fraction) * 1000
            }
            lower = bucket.bound
            below = bucket.count
        }
        return lower * 1000
    }

    /// The share of events (0 to 1) that took at most `milliseconds`, a bucket's bound (exact).
    func shareWithin(milliseconds: Double) -> Double {
        guard let total = buckets.last?.count, total > 0,
            let bucket = buckets.first(where: { abs($0.bound * 1000 - milliseconds) < 1e-9 })
        else { return .nan }
        return bucket.count / total
    }

    var meanMilliseconds: Double { count > 0 ? sum / count * 1000 : .nan }

    /// Non-cumulative counts by bound in milliseconds (`"+Inf"` for the last), for the `json` line.
    var bucketCounts: [String: Double] {
        var counts: [String: Double] = [:]
        var below = 0.0
        for bucket in buckets {
            counts[bucket.bound.isFinite ? String(format: "%g", bucket.bound * 1000) : "+Inf"] = bucket.count - below
            below = bucket.count
        }
        return counts
    }
}

/// A plain HTTP/1.0 GET on 127.0.0.1 (what a scraper does), its body; nil on any failure or after 5 s.
private func httpGet(port: Int, path: String) -> String? {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { return nil }
    defer { close(socket) }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { return nil }
    let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
    guard request.withUnsafeBytes({ send(socket, $0.baseAddress, $0.count, 0) }) == request.count else { return nil }
    var response: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let read = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        if read < 0 { return nil }
        if read == 0 { break }
        response += chunk[0..<read]
    }
    let text = String(decoding: response, as: UTF8.self)
    let status = text.prefix { $0 != "\r" }
    guard status.hasPrefix("HTTP/1.") && status.contains(" 200"), let body = text.range(of: "\r\n\r\n") else {
        return nil
    }
    return String(text[body.upperBound...])
}
