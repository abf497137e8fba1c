import APNs
import ReliabilityMatrix
import TestPeers
import Testing
import Worker
import WorkerDemo

/// The worker's APNs traffic through a real HTTP CONNECT proxy (tinyproxy, started here).
@Suite("The worker behind an egress proxy", .serialized, .timeLimit(.minutes(3)))
struct ProxyEgressTests {
    @Test("with apns.proxy set, every event is delivered through the proxy's CONNECT tunnel")
    func throughTinyproxy() async throws {
        let proxy = try TinyProxy(username: "worker", password: "egress-2026")
        defer { proxy.stop() }
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        harness.stack.simulator.devices.policy = .accept
        let events = (0..<200).map { Samples.alert(id: "proxy-\($0)", deviceToken: Samples.deviceToken($0 + 1)) }
        try await harness.produce(events)
        let worker = try harness.startWorker(group: "proxy") { configuration in
            configuration.apns.proxy = .url(
                APNsProxy(host: "127.0.0.1", port: proxy.port, username: "worker", password: "egress-2026"))
        }
        let results = try await harness.results(events.count)
        try await worker.stop()
        #expect(results.allSatisfy { $0.outcome == .delivered })
        #expect(harness.stack.simulator.observation.records.count >= events.count)
        let tunnels = proxy.log.split(separator: "\n").filter { $0.contains("CONNECT") && $0.contains("Request") }
        #expect(!tunnels.isEmpty, "tinyproxy logged no CONNECT: \(proxy.log.suffix(2000))")
        #expect(tunnels.count <= 8, "one tunnel per APNs connection, not per request: \(tunnels.count)")
    }
}
