import APNs
import Foundation
import Kafka
import Synchronization
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import Prometheus
import ServiceLifecycle
import TestPeers
import Testing

@testable import Worker

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Operations endpoint over HTTP", .timeLimit(.minutes(1)))
struct OperationsServerTests {
    struct Answer {
        var status: Int
        var body: String
        var headers: [AnyHashable: Any]
    }

    /// Runs the server as a `Service` in a `ServiceGroup` on 127.0.0.1, port 0; shuts it down gracefully after `body`.
    private func withServer(
        health: HealthState, registry: PrometheusCollectorRegistry, beforeScrape: @escaping @Sendable () -> Void = {},
        maxConnections: Int = 64, idleTimeout: Duration = .seconds(60), requestTimeout: Duration = .seconds(5),
        _ body: (_ port: Int) async throws -> Void
    ) async throws {
        try await withServer(
            health: health, registry: registry, beforeScrape: beforeScrape, maxConnections: maxConnections,
            idleTimeout: idleTimeout, requestTimeout: requestTimeout
        ) { port, _ in try await body(port) }
    }

    /// The same, with the server itself (to see how many connections it holds).
    private func withServer(
        health: HealthState, registry: PrometheusCollectorRegistry, beforeScrape: @escaping @Sendable () -> Void = {},
        maxConnections: Int = 64, idleTimeout: Duration = .seconds(60), requestTimeout: Duration = .seconds(5),
        _ body: (_ port: Int, _ server: OperationsServer) async throws -> Void
    ) async throws {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let logger = Logger(label: "test.operations")
        // A loop of its own: the rest of the suite, run at the same time, keeps the shared loops busy,
        // and these tests time what the server does.
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = OperationsServer(
            host: "127.0.0.1", port: 0, health: health, registry: registry, logger: logger, group: loops,
            beforeScrape: beforeScrape, onListening: { continuation.yield($0) }, maxConnections: maxConnections,
            idleTimeout: idleTimeout, requestTimeout: requestTimeout)
        let group = ServiceGroup(services: [server], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            #expect(port > 0)
            do {
                try await body(port, server)
            } catch {
                await group.triggerGracefulShutdown()
                try? await loops.shutdownGracefully()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            try await loops.shutdownGracefully()
        }
    }

    private func request(_ port: Int, _ path: String, method: String = "GET") async throws -> Answer {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return Answer(
            status: http.statusCode, body: String(decoding: data, as: UTF8.self), headers: http.allHeaderFields)
    }

    private func json(_ body: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
    }

    @Test("liveness, 404 and 405")
    func routes() async throws {
        try await withServer(health: HealthState(), registry: PrometheusCollectorRegistry()) { port in
            let live = try await request(port, "/health/live")
            #expect(live.status == 200)
            #expect(live.body == #"{"status":"ok"}"#)
            let head = try await request(port, "/health/live", method: "HEAD")
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(try await request(port, "/nope").status == 404)
            #expect(try await request(port, "/health").status == 404)
            #expect(try await request(port, "/health/live", method: "POST").status == 405)
            #expect(try await request(port, "/metrics?x=1").status == 200)
        }
    }

    // Past the cap the new connection was closed rather than an old one: 64 connections that sent
    // nothing locked the kubelet's probes out (an empty reply), and Kubernetes restarted a healthy pod.
    @Test("a full table of connections that sent nothing gives way: the probe is answered, the oldest silent one goes")
    func fullTableGivesWay() async throws {
        try await withServer(
            health: HealthState(), registry: PrometheusCollectorRegistry(), maxConnections: 3,
            requestTimeout: .seconds(60)
        ) { port, server in
            var silent: [RawSocket] = []
            for count in 1...3 {
                silent.append(try RawSocket(port: port))
                try await RawSocket.eventuallyHolds { server.openConnections == count }  // accepted in this order
            }
            // The kubelet's probe: a connection of its own, a request, the answer.
            let probe = try RawSocket(port: port)
            probe.send("GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(await probe.read(within: .seconds(5)).hasPrefix("HTTP/1.1 200"))
            // One silent connection made room (the server holds the other two once the probe's is
            // closed), and the server kept taking probes.
            try await RawSocket.eventuallyHolds { server.openConnections == 2 }
            #expect(server.openConnections == 2)
            for _ in 0..<5 { #expect(try await request(port, "/health/live").status == 200) }
        }
    }

    @Test("a connection that has made a request is kept over new ones that have not")
    func keepAliveClientsStay() async throws {
        try await withServer(
            health: HealthState(), registry: PrometheusCollectorRegistry(), maxConnections: 3,
            requestTimeout: .seconds(60)
        ) { port, server in
            let scraper = try RawSocket(port: port)
            scraper.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await scraper.read(within: .seconds(2)).hasPrefix("HTTP/1.1 200"))
            var silent: [RawSocket] = []
            for _ in 0..<4 {
                silent.append(try RawSocket(port: port))
                try await Task.sleep(for: .milliseconds(50))
            }
            // Two silent ones made room for the third and fourth: the scraper and two silent ones are held.
            try await RawSocket.eventuallyHolds { server.openConnections == 3 }
            #expect(server.openConnections == 3)
            #expect(await !scraper.closedByPeer(within: .milliseconds(200)))
            scraper.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await scraper.read(within: .seconds(2)).hasPrefix("HTTP/1.1 200"), "still served on its connection")
        }
    }

    // The idle timeout restarted on every byte: one byte every 50 s kept a connection for good.
    @Test("a request must arrive whole within the request time, however slowly its bytes trickle in")
    func slowRequestIsCut() async throws {
        try await withServer(
            health: HealthState(), registry: PrometheusCollectorRegistry(), idleTimeout: .seconds(60),
            requestTimeout: .seconds(1)
        ) { port in
            let slow = try RawSocket(port: port)
            var closed = false
            for byte in "GET /health/live HTTP/1.1\r\nHost: x\r\n".utf8 {
                slow.send(String(UnicodeScalar(byte)))
                if await slow.closedByPeer(within: .milliseconds(250)) {
                    closed = true
                    break
                }
            }
            #expect(closed, "cut at the request time, not kept alive by each byte")
            // Between requests a kept-alive connection may idle longer than the request time.
            let scraper = try RawSocket(port: port)
            scraper.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await scraper.read(within: .seconds(2)).hasPrefix("HTTP/1.1 200"))
            #expect(await !scraper.closedByPeer(within: .milliseconds(1_500)))
            scraper.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await scraper.read(within: .seconds(2)).hasPrefix("HTTP/1.1 200"))
        }
    }

    @Test("many slow clients trickling requests do not keep the probes from an answer")
    func probesUnderSlowClients() async throws {
        try await withServer(
            health: HealthState(), registry: PrometheusCollectorRegistry(), maxConnections: 8,
            requestTimeout: .seconds(1)
        ) { port in
            let stop = ManagedAtomicFlag()
            let attackers = Task.detached {
                var sockets: [RawSocket] = []
                while !stop.isSet {
                    if let socket = try? RawSocket(port: port) { sockets.append(socket) }
                    for socket in sockets.suffix(40) { socket.send("G") }
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            try await Task.sleep(for: .milliseconds(500))
            var answered = 0
            for _ in 0..<20 {
                if (try? await request(port, "/health/live").status) == 200 { answered += 1 }
                try await Task.sleep(for: .milliseconds(100))
            }
            stop.set()
            await attackers.value
            #expect(answered == 20)
        }
    }

    // 64 clients pipelining 2,000 `GET /metrics` each and reading nothing had every buffered request
    // answered into memory: the process grew by gigabytes, and the kubelet's probes went unanswered.
    @Test("clients that pipeline requests and read nothing neither grow the process nor keep the probes out")
    func pipelinedFloodStaysBounded() async throws {
        let registry = Self.largeRegistry()
        #expect(registry.emitToBuffer().count > 20_000)
        try await withServer(health: HealthState(), registry: registry) { port in
            let stop = ManagedAtomicFlag()
            let flood = Task {
                await PipelinedFlood.run(
                    port: port, connections: 64, requests: 2_000, request: "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
                    budget: 256 << 20, stop: stop)
            }
            var probes: [String] = []
            for _ in 0..<6 {
                try await Task.sleep(for: .seconds(1))
                probes.append(await Self.probe(port))
            }
            stop.set()
            let report = await flood.value
            probes.append(await Self.probe(port))  // once the clients are gone
            print("pipelined flood: \(report); probes: \(probes.joined(separator: ", "))")
            #expect(!report.cut, "the flood was cut: the process grew past the budget")
            #expect(report.growth < 64 << 20, "the process grew by \(report.growth >> 20) MB")
            #expect(probes.allSatisfy { $0.hasPrefix("200") }, "probes: \(probes)")
        }
    }

    // A response that never drained had no deadline: the connection and its answers stayed for good.
    @Test("a client that reads no answer is closed a request time after its last answer went out")
    func unreadAnswersAreCut() async throws {
        try await withServer(
            health: HealthState(), registry: Self.largeRegistry(), requestTimeout: .seconds(1)
        ) { port, server in
            let client = try RawSocket(port: port, receiveBuffer: 4096)
            client.send(String(repeating: "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", count: 200))
            try await RawSocket.eventuallyHolds { server.openConnections == 1 }
            try await RawSocket.eventuallyHolds { server.openConnections == 0 }
            #expect(server.openConnections == 0)
            withExtendedLifetime(client) {}  // open until here: the server, not the client, closes it
        }
    }

    @Test("at the limit a connection whose client reads no answer gives way, after idle ones")
    func unreadAnswersGiveWay() async throws {
        try await withServer(
            health: HealthState(), registry: Self.largeRegistry(), maxConnections: 2, requestTimeout: .seconds(60)
        ) { port, server in
            let pipelined = String(repeating: "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", count: 200)
            let scraper = try RawSocket(port: port)
            scraper.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await scraper.read(within: .seconds(2)).hasPrefix("HTTP/1.1 200"))
            let first = try RawSocket(port: port, receiveBuffer: 4096)
            first.send(pipelined)
            try await Task.sleep(for: .milliseconds(500))  // its answers fill the buffers
            // The idle scraper makes room, not the connection whose answers wait.
            #expect(await Self.probe(port).hasPrefix("200"))
            #expect(await scraper.closedByPeer(within: .seconds(1)))
            try await RawSocket.eventuallyHolds { server.openConnections == 1 }
            // With no idle one left, the one whose answers waited longest makes room.
            let second = try RawSocket(port: port, receiveBuffer: 4096)
            second.send(pipelined)
            try await Task.sleep(for: .milliseconds(500))
            #expect(await Self.probe(port).hasPrefix("200"))
            try await RawSocket.eventuallyHolds { server.openConnections == 1 }
            #expect(server.openConnections == 1)
            withExtendedLifetime((first, second)) {}
        }
    }

    /// A registry whose /metrics answer is tens of KB, as a worker reading many partitions serves.
    private static func largeRegistry() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        for partition in Int32(0)..<400 { metrics.setConsumerLag(topic: "notifications", partition: partition, lag: 1) }
        return registry
    }

    /// The kubelet's liveness probe on a connection of its own: "200 in 12 ms", or what it got instead.
    private static func probe(_ port: Int) async -> String {
        let start = ContinuousClock.now
        guard let socket = try? RawSocket(port: port) else { return "no connection" }
        socket.send("GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let answer = await socket.read(within: .seconds(5))
        let elapsed = (ContinuousClock.now - start).components
        let took = "\(elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000) ms"
        if answer.hasPrefix("HTTP/1.1 200") { return "200 in \(took)" }
        return answer.isEmpty ? "nothing in \(took)" : "\(answer.prefix(12)) in \(took)"
    }

    @Test("an idle connection is closed after the idle time")
    func idleTimeout() async throws {
        try await withServer(
            health: HealthState(), registry: PrometheusCollectorRegistry(), idleTimeout: .seconds(2)
        ) { port in
            let scraper = try RawSocket(port: port)
            scraper.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await scraper.read(within: .seconds(2)).hasPrefix("HTTP/1.1 200"))
            // The bound is generous: a loaded machine (the whole suite in parallel) ran the timer late.
            #expect(await scraper.closedByPeer(within: .seconds(10)))
        }
    }

    @Test("graceful shutdown closes the listening socket")
    func shutdown() async throws {
        var boundPort = 0
        try await withServer(health: HealthState(), registry: PrometheusCollectorRegistry()) { port async throws in
            boundPort = port
            #expect(try await request(port, "/health/live").status == 200)
        }
        await #expect(throws: (any Error).self) {
            _ = try await request(boundPort, "/health/live")
        }
    }

    @Test("liveness turns red without heartbeats")
    func stalled() async throws {
        let clock = ManualInstant()
        let health = HealthState(now: { clock.now })
        try await withServer(health: health, registry: PrometheusCollectorRegistry()) { port in
            clock.advance(by: .seconds(61))
            let stalled = try await request(port, "/health/live")
            #expect(stalled.status == 503)
            health.heartbeat()
            #expect(try await request(port, "/health/live").status == 200)
        }
    }

    @Test("readiness: red until the consumer joins, red with a broken credential, green again when it heals")
    func readiness() async throws {
        let health = HealthState()
        try await withServer(health: health, registry: PrometheusCollectorRegistry()) { port in
            let starting = try await request(port, "/health/ready")
            #expect(starting.status == 503)
            let checks = try #require(try json(starting.body)["checks"] as? [String: String])
            #expect(checks["kafka"] == "consumer has not joined its group")
            #expect(checks["credentials"] == "ok")

            health.markConsumerJoined()
            let ready = try await request(port, "/health/ready")
            #expect(ready.status == 200)
            #expect(try json(ready.body)["status"] as? String == "ok")

            health.markCredentialBroken(name: "app", reason: "InvalidProviderToken")
            let broken = try await request(port, "/health/ready")
            #expect(broken.status == 503)
            let body = try json(broken.body)
            #expect(body["status"] as? String == "unready")
            let credentials = try #require((body["checks"] as? [String: String])?["credentials"])
            #expect(credentials.hasPrefix("app: InvalidProviderToken since 20"))

            health.markCredentialHealthy(name: "app")
            #expect(try await request(port, "/health/ready").status == 200)

            health.markProducerFatal("Fatal \"idempotence\" error")
            let fatal = try await request(port, "/health/ready")
            #expect(fatal.status == 503)
            #expect(
                (try json(fatal.body)["checks"] as? [String: String])?["kafka"]
                    == "producer fatal: Fatal \"idempotence\" error")
        }
    }

    @Test("per-event series count each label value apart, in whatever order the values come")
    func alternatingSeries() {
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        for topic in ["a", "b", "a", "a", "c", "b"] { metrics.consumed(topic: topic) }
        let answers: [(Int?, String)] = [(200, ""), (nil, ""), (200, ""), (429, "TooManyRequests"), (200, "")]
        for (status, reason) in answers { metrics.apnsRequest(status: status, reason: reason, duration: .zero) }
        for (credential, outcome) in [
            ("app", "delivered"), ("other", "delivered"), ("app", "failed"), ("app", "delivered"),
        ] {
            metrics.completed(outcome: outcome, credential: credential)
        }
        for (credential, broken) in [("app", true), ("other", false), ("app", false), ("other", true)] {
            metrics.setCredentialBroken(credential, broken)
        }
        var bytes: [UInt8] = []
        registry.emit(into: &bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        for line in [
            #"apns_worker_events_consumed_total{topic="a"} 3"#,
            #"apns_worker_events_consumed_total{topic="b"} 2"#,
            #"apns_worker_events_consumed_total{topic="c"} 1"#,
            #"apns_worker_apns_requests_total{status="200",reason="",credential="none",lane="bulk"} 3"#,
            #"apns_worker_apns_requests_total{status="none",reason="",credential="none",lane="bulk"} 1"#,
            #"apns_worker_apns_requests_total{status="429",reason="TooManyRequests",credential="none",lane="bulk"} 1"#,
            #"apns_worker_events_completed_total{outcome="delivered"} 3"#,
            #"apns_worker_events_completed_total{outcome="failed"} 1"#,
            #"apns_worker_credential_outcomes_total{credential="app",outcome="delivered"} 2"#,
            #"apns_worker_credential_outcomes_total{credential="other",outcome="delivered"} 1"#,
            #"apns_worker_credential_outcomes_total{credential="app",outcome="failed"} 1"#,
            #"apns_worker_credentials_broken{credential="app"} 0"#,
            #"apns_worker_credentials_broken{credential="other"} 1"#,
        ] {
            #expect(text.contains(line), "missing: \(line)")
        }
    }

    @Test("/metrics serves Prometheus text with every metric the worker exports")
    func metrics() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        metrics.consumed(topic: "notifications")
        metrics.completed(outcome: "delivered")
        metrics.register(credential: "app")
        metrics.completed(outcome: "failed", credential: "app")
        metrics.deadLettered(reason: "schema")
        metrics.apnsRequest(status: 200, reason: "", duration: .milliseconds(12))
        metrics.apnsRequest(status: nil, reason: "", duration: .seconds(1))
        metrics.eventFinished(duration: .milliseconds(30))
        metrics.retryScheduled(cause: "too-many-requests")
        metrics.setInFlight(7)
        metrics.setInputHeld(true)
        metrics.setConsumerLag(topic: "notifications", partition: 3, lag: 42)
        let stalled = KafkaTopicPartition(topic: "notifications", partition: 5)
        let recovered = KafkaTopicPartition(topic: "notifications", partition: 6)
        metrics.partitionStall(.stalled(stalled, position: 10, end: 90, first: true))
        metrics.partitionStall(.stalled(stalled, position: 10, end: 95, first: false))
        metrics.partitionStall(.stalled(recovered, position: 1, end: 2, first: true))
        metrics.partitionStall(.recovered(recovered))
        metrics.committed(success: true)
        metrics.setCredentialBroken("app", true)
        // The pools' gauges are read at scrape time: each scrape sees the pool as it is then.
        let scrapes = NIOLockedValueBox(0)
        let sample: @Sendable () -> Void = {
            let scrape = scrapes.withLockedValue {
                $0 += 1; return $0
            }
            var pool = APNsPoolStatistics()
            pool.readyConnections = 4
            pool.drainingConnections = 1
            pool.streamsInUse = 100 * scrape
            pool.streamCapacity = 4000
            pool.waitingRequests = 3
            pool.retiredConnections = ["TooManyProviderTokenUpdates": scrape]
            metrics.setAPNsPool(credential: "app", environment: "production", pool)
            metrics.setProviderTokens(keyID: "KEY1234567", signed: 1 + scrape, switches: 2 * scrape, signingFailures: 0)
        }
        try await withServer(health: HealthState(), registry: registry, beforeScrape: sample) { port in
            let answer = try await request(port, "/metrics")
            #expect(answer.status == 200)
            #expect((answer.headers["Content-Type"] as? String)?.hasPrefix("text/plain; version=0.0.4") == true)
            let text = answer.body
            for line in [
                #"apns_worker_events_consumed_total{topic="notifications"} 1"#,
                #"apns_worker_events_completed_total{outcome="delivered"} 1"#,
                #"apns_worker_events_completed_total{outcome="expired"} 0"#,
                #"apns_worker_dead_letters_total{reason="schema"} 1"#,
                #"apns_worker_apns_requests_total{status="200",reason="",credential="none",lane="bulk"} 1"#,
                #"apns_worker_apns_requests_total{status="none",reason="",credential="none",lane="bulk"} 1"#,
                #"apns_worker_apns_request_duration_seconds_count{credential="none",lane="bulk"} 2"#,
                #"apns_worker_event_duration_seconds_count{credential="none",lane="bulk"} 1"#,
                #"apns_worker_retries_total{cause="too-many-requests"} 1"#,
                "apns_worker_in_flight_events 7",
                "apns_worker_consumer_paused 1",
                #"apns_worker_consumer_lag{topic="notifications",partition="3"} 42"#,
                #"apns_worker_partition_stalled{topic="notifications",partition="5"} 1"#,
                #"apns_worker_partition_stalled{topic="notifications",partition="6"} 0"#,
                #"apns_worker_partition_stall_seeks_total{topic="notifications"} 3"#,
                #"apns_worker_commits_total{result="ok"} 1"#,
                #"apns_worker_credentials_broken{credential="app"} 1"#,
                #"apns_worker_apns_connections{credential="app",environment="production",state="ready"} 4"#,
                #"apns_worker_apns_connections{credential="app",environment="production",state="connecting"} 0"#,
                #"apns_worker_apns_connections{credential="app",environment="production",state="draining"} 1"#,
                #"apns_worker_apns_streams_in_use{credential="app",environment="production"} 100"#,
                #"apns_worker_apns_stream_capacity{credential="app",environment="production"} 4000"#,
                #"apns_worker_apns_requests_waiting{credential="app",environment="production"} 3"#,
                #"apns_worker_apns_provider_tokens_signed_total{key_id="KEY1234567"} 2"#,
                #"apns_worker_apns_provider_token_switches_total{key_id="KEY1234567"} 2"#,
                #"apns_worker_apns_connections_retired_total{credential="app",environment="production",reason="TooManyProviderTokenUpdates"} 1"#,
                #"apns_worker_apns_connections_retired_total{credential="app",environment="production",reason="UnrelatedKeyIdInToken"} 0"#,
            ] {
                #expect(text.contains(line), "missing: \(line)")
            }
            // The build, outcomes by credential (every series there from the start), and a HELP line
            // before every metric's TYPE line.
            #expect(text.contains(#"apns_worker_build_info{version="\#(WorkerVersion.current)"} 1"#))
            #expect(text.contains(#"apns_worker_credential_outcomes_total{credential="app",outcome="failed"} 1"#))
            #expect(text.contains(#"apns_worker_credential_outcomes_total{credential="app",outcome="delivered"} 0"#))
            // Every dlq-reason from the start, so rate() counts its first dead letter after a restart.
            for reason in DeadLetterReason.allCases where reason != .schema {
                #expect(
                    text.contains(#"apns_worker_dead_letters_total{reason="\#(reason.rawValue)"} 0"#),
                    "no series at 0 for \(reason.rawValue)")
            }
            let lines = text.split(separator: "\n")
            for (index, line) in lines.enumerated() where line.hasPrefix("# TYPE ") {
                let name = line.split(separator: " ")[2]
                #expect(index > 0 && lines[index - 1].hasPrefix("# HELP \(name) "), "no HELP for \(name)")
            }
            let again = try await request(port, "/metrics").body
            #expect(again.contains(#"apns_worker_apns_streams_in_use{credential="app",environment="production"} 200"#))
            // Counters kept from totals read at scrape time move by what the totals grew.
            #expect(again.contains(#"apns_worker_apns_provider_tokens_signed_total{key_id="KEY1234567"} 3"#))
            #expect(again.contains(#"apns_worker_apns_provider_token_switches_total{key_id="KEY1234567"} 4"#))
            #expect(
                again.contains(
                    #"apns_worker_apns_connections_retired_total{credential="app",environment="production",reason="TooManyProviderTokenUpdates"} 2"#
                ))
        }
    }
}

/// A clock reading the test moves by hand.
final class ManualInstant: Sendable {
    private let state = Mutex(ContinuousClock.now)
    var now: ContinuousClock.Instant { state.withLock { $0 } }
    func advance(by duration: Duration) { state.withLock { $0 = $0.advanced(by: duration) } }
}

/// A plain TCP connection to 127.0.0.1 that sends nothing, to see when the server closes it.
/// A flag set once, read from any thread.
final class ManagedAtomicFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// A client socket whose waits run on a thread of their own: a `poll` where the test runs would hold
/// one of the process's cooperative threads (one per core) and stall the tests in parallel with it.
final class RawSocket: Sendable {
    let descriptor: Int32

    /// - Parameter receiveBuffer: `SO_RCVBUF`, set before connecting so that the window it offers is small.
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { throw CocoaError(.fileReadUnknown) }
    }

    func send(_ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer {
            Glibc.send(descriptor, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL))
        }
    }

    /// Sends what the socket takes now without waiting: the count sent (0 if its buffer is full), nil once
    /// the connection is gone.
    func sendWithoutWaiting(_ bytes: ArraySlice<UInt8>) -> Int? {
        let count = bytes.withUnsafeBytes {
            Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        if count >= 0 { return count }
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : nil
    }

    /// What arrives within `within` (one read).
    func read(within: Duration) async -> String {
        await onOwnThread {
            guard self.readable(within: within) else { return "" }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            let count = recv(self.descriptor, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer.prefix(count), as: UTF8.self) : ""
        }
    }

    /// True if the peer closed the connection (a read sees its end) within `within`.
    func closedByPeer(within: Duration) async -> Bool {
        await onOwnThread {
            guard self.readable(within: within) else { return false }
            var byte: UInt8 = 0
            return recv(self.descriptor, &byte, 1, 0) <= 0
        }
    }

    /// Whether something (bytes or the connection's end) can be read within `within`.
    private func readable(within: Duration) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(
            within.components.seconds * 1000 + within.components.attoseconds / 1_000_000_000_000_000)
        return poll(&entry, 1, milliseconds) == 1
    }

    /// Waits (up to 5 s) until `condition` holds.
    static func eventuallyHolds(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }

    deinit { close(descriptor) }
}

/// Clients that pipeline `requests` copies of one request each and never read, on a thread of their own.
/// Sampling the process's resident memory as they go, they close their sockets once it grew past `budget`, so
/// that a server queueing its answers does not take the machine's memory; `stop` ends them too.
enum PipelinedFlood {
    struct Report: Sendable, CustomStringConvertible {
        /// The most the process grew while they ran, in bytes.
        var growth: Int
        /// They stopped because the process grew past the budget.
        var cut: Bool
        var seconds: Double
        var description: String {
            "grew \(growth >> 20) MB at most\(cut ? ", cut at the budget" : "") over \(String(format: "%.1f", seconds)) s"
        }
    }

    static func run(
        port: Int, connections: Int, requests: Int, request: String, budget: Int, stop: ManagedAtomicFlag
    ) async -> Report {
        await onOwnThread {
            let start = ContinuousClock.now
            let before = residentBytes()
            var sockets = (0..<connections).compactMap { _ in try? RawSocket(port: port, receiveBuffer: 4096) }
            let bytes = Array(String(repeating: request, count: requests).utf8)
            var sent = [Int](repeating: 0, count: sockets.count)
            var report = Report(growth: 0, cut: false, seconds: 0)
            while !stop.isSet, !report.cut {
                for index in sockets.indices where sent[index] < bytes.count {
                    let count = sockets[index].sendWithoutWaiting(bytes[sent[index]...])
                    sent[index] = count.map { sent[index] + $0 } ?? bytes.count  // nil: the server closed it
                }
                report.growth = max(report.growth, residentBytes() - before)
                report.cut = report.growth > budget
                usleep(10_000)
            }
            sockets.removeAll()
            let elapsed = (ContinuousClock.now - start).components
            report.seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
            return report
        }
    }

    /// The process's resident memory (`/proc/self/statm`'s second field, in pages).
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let pages = text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * sysconf(Int32(_SC_PAGESIZE))
    }
}
