// Throughput and latency of the APNs client against an HTTP/2 server (nghttpd from Debian's
// nghttp2-server, or the simulator), with the same connections x streams as the reference tool
// (h2load) is given by Benchmarks/run.sh. Prints one line of figures; never fails on a time.
//
//   APNsClientBenchmark --port P --ca-file F [--host H] [--token HEX] [--count N] [--connections C]
//                       [--streams S] [--key-file P8 --team-id T --key-id K] [--api callback|async]
//
// `--api callback` (the default) keeps connections x streams sends in flight through the callback
// `send`, as the worker does; `--api async` gives each send a task and awaits it.
import APNs
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#endif

struct Options {
    var host = "localhost"
    var port = 0
    var caFile = ""
    var token = "00aa11bb22cc33dd44ee55ff66778899aabbccddeeff00112233445566778899"
    var count = 100_000
    var connections = 4
    var streams = 100
    var keyFile: String?
    var teamID = "TEAM123456"
    var keyID = "KEY1234567"
    var topic = "com.example.app"
    var payload = #"{"aps":{"alert":"benchmark"}}"#
    var threads = 1
    var api = "callback"

    init(_ arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let flag = iterator.next() {
            let value = iterator.next() ?? ""
            switch flag {
            case "--host": host = value
            case "--port": port = Int(value) ?? 0
            case "--ca-file": caFile = value
            case "--token": token = value
            case "--count": count = Int(value) ?? count
            case "--connections": connections = Int(value) ?? connections
            case "--streams": streams = Int(value) ?? streams
            case "--key-file": keyFile = value
            case "--team-id": teamID = value
            case "--key-id": keyID = value
            case "--topic": topic = value
            case "--payload": payload = value
            case "--threads": threads = Int(value) ?? threads
            case "--api": api = value
            default: fatalError("unknown flag \(flag)")
            }
        }
    }
}

func peakRSSMegabytes() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}

let options = Options(CommandLine.arguments)
var configuration = APNsClientConfiguration(
    environment: .development, host: options.host, port: options.port,
    tls: APNsTLSConfiguration(trust: .caFile(options.caFile)))
configuration.connectionsPerCredential = options.connections
configuration.maximumStreamsPerConnection = options.streams
configuration.maximumWaitingRequests = options.connections * options.streams * 2
configuration.requestTimeout = .seconds(60)
configuration.eventLoopThreads = options.threads

let keyFile: String
if let given = options.keyFile {
    keyFile = given
} else {
    // nghttpd ignores the authorization header; any P-256 key will do.
    keyFile = NSTemporaryDirectory() + "apns-bench-\(getpid()).p8"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [
        "openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyFile,
    ]
    try process.run()
    process.waitUntilExit()
}
let authenticator = try APNsTokenAuthenticator(
    teamID: options.teamID, keyID: options.keyID, key: APNsSigningKey(file: keyFile))
if options.keyFile == nil { unlink(keyFile) }
let client = try APNsClient(configuration: configuration, credential: .token(authenticator))
let notification = APNsNotification(
    deviceToken: try APNsDeviceToken(options.token), topic: options.topic, pushType: .alert,
    payload: Array(options.payload.utf8))

// Warm-up: connections open and the one-stream rule lifts.
for _ in 0..<options.connections * 2 { _ = try await client.send(notification) }

let concurrency = options.connections * options.streams

/// Keeps `concurrency` callback sends in flight until `count` have been answered.
final class CallbackDriver: Sendable {
    struct Tally {
        var started = 0
        var latencies: [Duration] = []
        var statuses: [Int: Int] = [:]
        var failures = 0
        var done: CheckedContinuation<Void, Never>?
        var finished = 0
    }
    let client: APNsClient
    let notification: APNsNotification
    let count: Int
    let tally = NIOLockedValueBox(Tally())

    init(client: APNsClient, notification: APNsNotification, count: Int) {
        self.client = client
        self.notification = notification
        self.count = count
        tally.withLockedValue { $0.latencies.reserveCapacity(count) }
    }

    func run(concurrency: Int) async -> ([Duration], [Int: Int], Int) {
        await withCheckedContinuation { continuation in
            tally.withLockedValue { $0.done = continuation }
            for _ in 0..<min(concurrency, count) { startOne() }
        }
        return tally.withLockedValue { ($0.latencies, $0.statuses, $0.failures) }
    }

    private func startOne() {
        let go = tally.withLockedValue { tally -> Bool in
            guard tally.started < count else { return false }
            tally.started += 1
            return true
        }
        guard go else { return }
        client.send(notification) { [self] result in
            let done = tally.withLockedValue { tally -> CheckedContinuation<Void, Never>? in
                switch result {
                case .success(let response):
                    tally.latencies.append(response.latency)
                    tally.statuses[response.status, default: 0] += 1
                case .failure:
                    tally.failures += 1
                }
                tally.finished += 1
                guard tally.finished == count else { return nil }
                defer { tally.done = nil }
                return tally.done
            }
            if let done { done.resume() } else { startOne() }
        }
    }
}

let start = ContinuousClock.now
let (latencies, statuses, failures): ([Duration], [Int: Int], Int)
if options.api == "async" {
    (latencies, statuses, failures) = await withTaskGroup(of: (Duration?, Int?).self) { group in
        var latencies: [Duration] = []
        latencies.reserveCapacity(options.count)
        var statuses: [Int: Int] = [:]
        var failures = 0
        var started = 0
        func startOne() {
            group.addTask {
                do {
                    let response = try await client.send(notification)
                    return (response.latency, response.status)
                } catch {
                    return (nil, nil)
                }
            }
            started += 1
        }
        while started < min(concurrency, options.count) { startOne() }
        while let (latency, status) = await group.next() {
            if let latency, let status {
                latencies.append(latency)
                statuses[status, default: 0] += 1
            } else {
                failures += 1
            }
            if started < options.count { startOne() }
        }
        return (latencies, statuses, failures)
    }
} else {
    (latencies, statuses, failures) = await CallbackDriver(
        client: client, notification: notification, count: options.count
    ).run(concurrency: concurrency)
}
let elapsed = ContinuousClock.now - start
await client.shutdown()

let sorted = latencies.sorted()
func percentile(_ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    let value = sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    return Double(value.components.attoseconds) / 1e15 + Double(value.components.seconds) * 1000
}
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
let rate = Double(options.count) / seconds
print(
    String(
        format:
            "apns-client (%@ API): %d notifications, %d connections x %d streams: %.0f notifications/s, p50 %.2f ms, p99 %.2f ms, peak RSS %.1f MiB, statuses %@, failures %d",
        options.api as NSString, options.count, options.connections, options.streams, rate, percentile(0.5),
        percentile(0.99),
        peakRSSMegabytes(),
        statuses.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") as NSString, failures
    ))
