import APNsSimulator
import Foundation
import Kafka
import ReliabilityMatrix
import TestPeers
import Testing
import Worker
import WorkerDemo

/// `consumer.lanes`: urgent topics read, admitted and sent apart from a bulk backlog.
@Suite("Urgent before bulk: lanes", .serialized, .timeLimit(.minutes(5)))
struct LanesTests {
    static let urgentTopic = "signin"

    /// Every result record written, and the event ids written more than once.
    static func resultsWritten(_ harness: Harness) async throws -> (all: [KafkaConsumerMessage], twice: [String]) {
        let all = try await harness.allRecords(of: EmbeddedStack.resultsTopic)
        let ids = try all.compactMap { try ResultRecord($0).eventID }
        return (all, Dictionary(grouping: ids, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted())
    }

    // Without lanes an urgent record waits behind every bulk record fetched before it: in
    // librdkafka's queue, the consumer's buffer and the in-flight bound, first come first served.
    @Test(
        "an urgent event is pushed while the bulk lane is held at its bound; both lanes end with one result per event, pushed once",
        arguments: Broker.allCases)
    func urgentWhileBulkIsHeld(_ broker: Broker) async throws {
        let harness = try await Self.startHarness(broker: broker)
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        let log = CapturedLog()
        let worker = try harness.startWorker(
            group: "lanes-\(broker)", maxInFlight: 20, logger: log.logger(level: .info), configure: Self.lanes)
        let bulk = worker.assembly.pipeline
        let urgent = try #require(worker.assembly.urgent)
        try await Self.bothAssigned(bulk, urgent)
        // Each push takes a second: the bulk lane, 20 at a time, needs 15 s for its 300.
        simulator.faults.latency = .fixed(.seconds(1))
        try await harness.produce((0..<300).map { Self.event("bulk-\($0)", token: $0 + 1) })
        try await eventually(60, "bulk held at its bound", state: { Self.describe(bulk, urgent) }) {
            bulk.inFlight == 20
        }
        try await harness.produce(Self.urgentEvents(10))

        // In the order APNs received them: the bulk pushes made before the last urgent one.
        let urgentTokens = Set((0..<10).map { Samples.deviceToken(1_000 + $0) })
        try await eventually(30, "the urgent pushes made", state: { Self.describe(bulk, urgent) }) {
            simulator.observation.records.filter { urgentTokens.contains($0.deviceToken) }.count == 10
        }
        let received = simulator.observation.records.map(\.deviceToken)
        let lastUrgent = try #require(received.lastIndex { urgentTokens.contains($0) })
        let bulkBefore = received[..<lastUrgent].filter { !urgentTokens.contains($0) }.count
        #expect(bulkBefore < 150, "the urgent events did not wait for the bulk backlog (\(bulkBefore) of 300 first)")

        simulator.faults.latency = .none
        let results = try await harness.results(310)
        try await worker.stop()
        #expect(results.count == 310 && results.allSatisfy { $0.outcome == .delivered })
        let (all, twice) = try await Self.resultsWritten(harness)
        // What the group did meanwhile, should an event have run twice.
        let membership = log.lines.filter { line in
            ["assigned", "revoked", "lost", "warning", "error", "rebalanc"].contains { line.contains($0) }
        }
        #expect(all.count == 310, "one result per event, none twice (\(all.count): \(twice); \(membership))")
        #expect(simulator.observation.count(status: 200) == 310, "each event pushed once")
    }

    // Two services of one group stop one after the other, and each pipeline closed the APNs
    // connections after its own drain: the lane that stopped first closed them under the other's
    // requests.
    @Test("a stop of one lane stops both together; both drain and every event ends delivered once")
    func lanesStopTogether() async throws {
        let harness = try await Self.startHarness()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.faults.latency = .fixed(.seconds(3))
        // A new connection takes one stream until APNs has accepted its token: the first answer
        // (3 s), then the rest (3 s more), past the drain's half of the embedded 10 s shutdown
        // timeout. What a drain gives up is pushed again by the next worker, by design.
        let worker = try harness.startWorker(group: "lanes-stop", maxInFlight: 20) {
            Self.lanes(&$0)
            $0.delivery.shutdownTimeout = .seconds(20)
        }
        let bulk = worker.assembly.pipeline
        let urgent = try #require(worker.assembly.urgent)
        try await Self.bothAssigned(bulk, urgent)
        try await harness.produce((0..<40).map { Self.event("bulk-\($0)", token: $0 + 1) } + Self.urgentEvents(10))
        try await eventually(60, "both lanes busy", state: { Self.describe(bulk, urgent) }) {
            bulk.inFlight > 0 && urgent.inFlight > 0
        }
        bulk.beginShutdown()
        try await eventually(2, "the urgent lane stopping with the bulk lane") { urgent.isStopping }
        try await worker.stop()

        // What the first worker did not finish, the next one does.
        simulator.faults.latency = .none
        let next = try harness.startWorker(group: "lanes-stop", maxInFlight: 20, configure: Self.lanes)
        let results = try await harness.results(50)
        try await next.stop()
        #expect(
            results.allSatisfy { $0.outcome == .delivered },
            "\(results.filter { $0.outcome != .delivered }.map(\.reason))")
        let (all, twice) = try await Self.resultsWritten(harness)
        #expect(all.count == 50, "one result per event, none twice (\(all.count): \(twice))")
        #expect(simulator.observation.count(status: 200) == 50, "each event pushed once")
    }

    // An urgent lane's connection opened at its first event: the first sign-in code after a start
    // paid the TCP and TLS handshakes (150 to 280 ms more than the next ones, measured).
    @Test("the urgent lane opens its APNs connection at start; its first event is sent on it")
    func urgentConnectionOpensAtStart() async throws {
        let harness = try await Self.startHarness()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        let worker = try harness.startWorker(group: "lanes-connect", configure: Self.lanes)
        try await eventually(
            30, "the urgent lane's connection open", state: { "\(simulator.observation.liveConnections)" }
        ) {
            simulator.observation.liveConnections == 1
        }
        #expect(simulator.observation.records.isEmpty, "opened before any event")
        try await harness.produce(Self.urgentEvents(1))
        let results = try await harness.results(1)
        try await worker.stop()
        #expect(results.map(\.outcome) == [.delivered])
        #expect(simulator.observation.totalConnections == 1, "the event went on the connection opened at start")
    }

    // As separate services a failed lane ended the group, and the others with it; inside one
    // service a lane that fails before its stop began must stop the others itself.
    @Test("a lane that cannot start stops the other: the lanes' service ends with its error")
    func aFailedLaneStopsTheOther() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let configuration = try harness.stack.configuration(group: "lanes-failed")
        let pipelineConfiguration = PipelineConfiguration(
            inputTopics: configuration.consumer.topics, resultsTopic: configuration.topics.results,
            deadLetterTopic: configuration.topics.deadLetters)
        let sender = LostAssignmentTests.HoldingSender(holding: [])
        let healthy = WorkerPipeline(
            configuration: pipelineConfiguration, consumer: configuration.kafkaConsumerConfiguration,
            producer: configuration.kafkaProducerConfiguration, sender: sender, logger: harness.logger)
        var broken = configuration.kafkaProducerConfiguration
        broken.properties["no.such.property"] = "1"  // librdkafka refuses it: the producer is never made
        let failing = WorkerPipeline(
            configuration: pipelineConfiguration, consumer: configuration.kafkaConsumerConfiguration,
            producer: broken, sender: sender, logger: harness.logger)
        let lanes = PipelineLanes([healthy, failing])
        let outcome = await Task { () -> String in
            do {
                try await lanes.run()
                return "ended without an error"
            } catch {
                return "\(error)"
            }
        }.value
        #expect(outcome.contains("no.such.property"), "\(outcome)")
        #expect(healthy.isStopping)
    }

    @Test("with two apps and an urgent lane, /metrics says which app and which lane each answer and event was")
    func metricsByAppAndLane() async throws {
        let harness = try await Self.startHarness()
        defer { Task { await harness.shutdown() } }
        let news = "com.example.news"
        let worker = try harness.startWorker(group: "lanes-metrics", maxInFlight: 20) { configuration in
            Self.lanes(&configuration)
            var second = configuration.apns.credentials[0]
            second.name = "news"
            second.topics = [news]
            configuration.apns.credentials.append(second)
        }
        let urgent = try #require(worker.assembly.urgent)
        try await Self.bothAssigned(worker.assembly.pipeline, urgent)
        let newsEvents = (0..<4).map {
            Samples.alert(id: "news-\($0)", deviceToken: Samples.deviceToken(2_000 + $0), topic: news, partition: nil)
        }
        try await harness.produce((0..<6).map { Self.event("bulk-\($0)", token: $0 + 1) } + newsEvents)
        try await harness.produce(Self.urgentEvents(3))
        _ = try await harness.results(13)
        worker.assembly.beforeScrape()
        var bytes: [UInt8] = []
        worker.assembly.registry.emit(into: &bytes)
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        try await worker.stop()
        let routed = lines.filter {
            $0.hasPrefix("apns_worker_apns_requests_total{")
                || $0.hasPrefix("apns_worker_event_duration_seconds_count{")
                || $0.hasPrefix("apns_worker_apns_request_duration_seconds_count{")
        }
        // The scrape an operator reads (printed for the record).
        print(routed.joined(separator: "\n"))
        for line in [
            #"apns_worker_apns_requests_total{status="200",reason="",credential="demo",lane="bulk"} 6"#,
            #"apns_worker_apns_requests_total{status="200",reason="",credential="news",lane="bulk"} 4"#,
            #"apns_worker_apns_requests_total{status="200",reason="",credential="demo",lane="urgent"} 3"#,
            #"apns_worker_event_duration_seconds_count{credential="demo",lane="bulk"} 6"#,
            #"apns_worker_event_duration_seconds_count{credential="news",lane="bulk"} 4"#,
            #"apns_worker_event_duration_seconds_count{credential="demo",lane="urgent"} 3"#,
            #"apns_worker_event_duration_seconds_count{credential="news",lane="urgent"} 0"#,
            #"apns_worker_event_duration_seconds_count{credential="none",lane="urgent"} 0"#,
        ] {
            #expect(lines.contains { $0 == line }, "missing \(line) in \(routed)")
        }
        // Bounded by the configuration: 2 credentials and none, on 2 lanes.
        let histograms = lines.filter { $0.hasPrefix("apns_worker_event_duration_seconds_count{") }
        #expect(histograms.count == 6, "\(histograms)")
    }

    /// A harness with the urgent topic made beside the input topic and an APNs that accepts every
    /// device.
    static func startHarness(broker: Broker = .mock) async throws -> Harness {
        let harness = try await Harness.start(broker: broker)
        do {
            try await harness.stack.cluster.create(topic: urgentTopic, partitions: 2)
        } catch {
            await harness.shutdown()
            throw error
        }
        harness.stack.simulator.devices.policy = .accept
        return harness
    }

    /// Waits until the bulk lane owns the input topic's 4 partitions and the urgent lane the urgent
    /// topic's 2. Tests produce only after it: on a loaded machine a lane may join seconds after the
    /// other, and the rebalance that follows (fencing a busy member on the mock cluster, see
    /// docs/kafka.md) or a lane done before the other began is other tests' subject.
    static func bothAssigned(_ bulk: WorkerPipeline, _ urgent: WorkerPipeline) async throws {
        try await eventually(60, "both lanes assigned", state: { describe(bulk, urgent) }) {
            bulk.ownedPartitions == 4 && urgent.ownedPartitions == 2
        }
    }

    /// Each lane's partitions and events in flight, for a wait's failure message.
    static func describe(_ bulk: WorkerPipeline, _ urgent: WorkerPipeline) -> String {
        "bulk: \(bulk.ownedPartitions) partitions, \(bulk.inFlight) in flight; "
            + "urgent: \(urgent.ownedPartitions) partitions, \(urgent.inFlight) in flight"
    }

    /// The urgent topic as the urgent lane, 10 of its events in flight at most.
    static func lanes(_ configuration: inout WorkerConfiguration) {
        configuration.consumer.topics.append(urgentTopic)
        var urgent = UrgentLane(topics: [urgentTopic])
        urgent.maxInFlight = 10
        configuration.consumer.urgent = urgent
    }

    /// `count` events on the urgent topic, `urgent-0`, `urgent-1`, …, to devices of their own.
    static func urgentEvents(_ count: Int) -> [KafkaProducerMessage] {
        (0..<count).map {
            var record = event("urgent-\($0)", token: 1_000 + $0)
            record.topic = urgentTopic
            return record
        }
    }

    static func event(_ id: String, token: Int) -> KafkaProducerMessage {
        Samples.alert(id: id, deviceToken: Samples.deviceToken(token), topic: EmbeddedStack.bundleID, partition: nil)
    }
}
