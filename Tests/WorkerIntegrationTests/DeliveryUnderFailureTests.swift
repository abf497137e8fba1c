import APNsSimulator
import Foundation
import ReliabilityMatrix
import Kafka
import NIOConcurrencyHelpers
import Testing
import Worker
import WorkerDemo

/// The incidents where a push pipeline is judged: records Kafka will not take, events the worker
/// has no credential for, a backlog of stale events, a shutdown in the middle of a storm.
@Suite(
    "The worker in incidents: poison records, missing credentials, stale events, shutdown in a storm",
    .serialized, .timeLimit(.minutes(5)))
struct DeliveryUnderFailureTests {
    /// A valid alert event for the demo app (or `topic`), as a record of the input topic.
    static func event(
        _ id: String, token: Int, topic: String = EmbeddedStack.bundleID, partition: Int32? = 0,
        timestampMilliseconds: Int64? = nil
    ) -> KafkaProducerMessage {
        Samples.alert(
            id: id, deviceToken: Samples.deviceToken(token), topic: topic, partition: partition,
            timestampMilliseconds: timestampMilliseconds)
    }

    // A 6,000-byte poison record under a producer limit of 4,000 bytes: its dead letter was refused
    // locally (MSG_SIZE_TOO_LARGE) and retried forever, the partition's commit never moved past it,
    // and a restart pushed the 50 events behind it again.
    @Test(
        "a dead letter too large for the producer is published degraded: 51 results, commit at the end, nothing twice after a restart"
    )
    func poisonRecordDoesNotFreezeItsPartition() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        harness.stack.simulator.devices.policy = .accept
        let poison = KafkaProducerMessage(
            topic: EmbeddedStack.inputTopic, partition: 0, key: Array("poison".utf8),
            value: Array(repeating: UInt8(ascii: "x"), count: 6_000))
        try await harness.produce([poison] + (0..<50).map { Self.event("ok-\($0)", token: $0 + 1) })

        let limited: (inout WorkerConfiguration) -> Void = { $0.producer.properties["message.max.bytes"] = "4000" }
        let worker = try harness.startWorker(group: "poison", configure: limited)
        let results = try await harness.results(51)
        #expect(results.filter { $0.outcome == .delivered }.count == 50)
        let poisoned = try #require(results.first { $0.sourceOffset == 0 })
        #expect(poisoned.outcome == .invalid)

        let letters = try await harness.deadLetters(1)
        let letter = try #require(letters.first)
        #expect(letter.value == nil, "the value Kafka would not take is left out")
        #expect(letter.headers.lastString(DeadLetterHeader.degraded) == "MSG_SIZE_TOO_LARGE")
        #expect(letter.headers.lastString(DeadLetterHeader.originalValueBytes) == "6000")
        #expect(letter.headers.lastString(DeadLetterHeader.reason) == "malformed-json")
        #expect(letter.headers.lastString(DeadLetterHeader.sourceOffset) == "0")
        #expect(letter.key == Array("poison".utf8))
        try await eventually(15, "offsets committed to the end") {
            try await harness.commitProgress(group: "poison").allSatisfy { $0.committed ?? 0 == $0.end }
        }
        try await worker.stop()

        // A restart in the same group finds nothing left to do.
        let again = try harness.startWorker(group: "poison", configure: limited)
        try await Task.sleep(for: .seconds(8))  // past the group's join on the mock cluster
        try await again.stop()
        let all = try await harness.allRecords(of: EmbeddedStack.resultsTopic)
        #expect(all.count == 51, "\(all.count) results: nothing was processed twice")
    }

    // The result echoes the event's metadata: 5,000 bytes of it under a producer limit of 4,000
    // bytes make a result Kafka will not take as it is. Its degraded form leaves the metadata out.
    @Test(
        "a result too large for the producer is published degraded: delivered, without metadata, with its source and the degraded header"
    )
    func oversizedResultIsDegraded() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        harness.stack.simulator.devices.policy = .accept
        let padding = String(repeating: "m", count: 5_000)
        let big = KafkaProducerMessage(
            topic: EmbeddedStack.inputTopic, partition: 0, key: Array("big".utf8),
            value: Array(
                #"{"id":"big","deviceToken":"\#(Samples.deviceToken(7))","topic":"\#(EmbeddedStack.bundleID)","pushType":"alert","payload":{"aps":{"alert":"hi"}},"metadata":{"pad":"\#(padding)"}}"#
                    .utf8))
        try await harness.produce([Self.event("small-0", token: 1), big, Self.event("small-1", token: 2)])

        let worker = try harness.startWorker(group: "oversized-result") {
            $0.producer.properties["message.max.bytes"] = "4000"
        }
        let results = try await harness.results(3)
        #expect(results.allSatisfy { $0.outcome == .delivered })
        let degraded = try #require(results.first { $0.eventID == "big" })
        #expect(degraded.sourcePartition == 0)
        #expect(degraded.sourceOffset == 1)
        #expect(degraded.record.headers.lastString("apns-worker-degraded") == "MSG_SIZE_TOO_LARGE")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(degraded.record.value ?? [])) as? [String: Any])
        #expect(object["metadata"] == nil, "the degraded form leaves the metadata out")
        #expect((object["source"] as? [String: Any])?["topic"] as? String == EmbeddedStack.inputTopic)
        for small in results where small.eventID != "big" {
            #expect(small.record.headers.lastString("apns-worker-degraded") == nil)
        }
        try await worker.stop()
    }

    // One event for an app without a credential made the pod unready until it restarted, exported
    // a credential gauge labelled with the event's topic, and dead-lettered it as `credentials`.
    @Test(
        "an event for an app without a credential is rejected and dead-lettered as no-credential; readiness stays green"
    )
    func noCredentialIsNotABrokenCredential() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        harness.stack.simulator.devices.policy = .accept
        let stranger = Self.event("stranger", token: 999, topic: "com.producer.chosen.label")
        try await harness.produce([stranger] + (0..<20).map { Self.event("ok-\($0)", token: $0 + 1) })

        let worker = try harness.startWorker(group: "no-credential")
        let results = try await harness.results(21)
        let rejected = try #require(results.first { $0.eventID == "stranger" })
        #expect(rejected.outcome == .rejected)
        #expect(rejected.reason == "noCredentialForTopic")
        #expect(rejected.attempts == 0, "nothing was sent")
        #expect(rejected.status == nil)
        #expect(results.filter { $0.outcome == .delivered }.count == 20)
        let letter = try #require(try await harness.deadLetters(1).first)
        #expect(letter.headers.lastString(DeadLetterHeader.reason) == "no-credential")

        #expect(worker.assembly.health.readiness.isReady, "\(worker.assembly.health.readiness)")
        let metrics = worker.assembly.registry.emitToString()
        #expect(!metrics.contains("com.producer.chosen.label"), "no metric label comes from event data")
        #expect(metrics.contains(#"apns_worker_dead_letters_total{reason="no-credential"} 1"#))
        try await worker.stop()
    }

    // An expired APNs certificate passed `check` and nothing showed its expiry until APNs refused
    // it: the classic APNs outage, yearly.
    @Test(
        "an expired certificate: its app's events are dead-lettered as credentials without being sent, every other app is delivered, its expiry is a metric"
    )
    func expiredCertificate() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        harness.stack.simulator.devices.policy = .accept
        let legacy = "com.example.legacy"
        let january2020 = Date(timeIntervalSince1970: 1_577_836_800)...Date(timeIntervalSince1970: 1_580_515_200)
        let issued = try SimulatorCertificateAuthority().issueClientCertificate(topics: [legacy], validity: january2020)
        let certificateFile = harness.stack.directory + "/legacy.pem"
        let keyFile = harness.stack.directory + "/legacy-key.pem"
        try Data(try issued.certificatePEM.utf8).write(to: URL(fileURLWithPath: certificateFile))
        try Data(issued.privateKeyPEM.utf8).write(to: URL(fileURLWithPath: keyFile))
        try await harness.produce(
            (0..<10).map { Self.event("old-\($0)", token: $0 + 100, topic: legacy) }
                + (0..<20).map { Self.event("ok-\($0)", token: $0 + 1) })

        let worker = try harness.startWorker(group: "expired-certificate") {
            $0.apns.credentials.append(
                CredentialSettings(
                    name: "legacy", topics: [legacy],
                    kind: .certificate(
                        CertificateCredentialSettings(
                            source: .pem(certificateFile: certificateFile, privateKeyFile: keyFile)))))
        }
        // Said at start, before any event: readiness names the credential and why; the pod stays
        // ready, for its other credential pushes.
        #expect(!worker.assembly.health.readiness.everyCredentialBroken)
        #expect(
            worker.assembly.health.readiness.credentials.contains("legacy: certificateExpired"),
            "\(worker.assembly.health.readiness)")
        let metrics = worker.assembly.registry.emitToString()
        #expect(metrics.contains(#"apns_worker_credential_expiry_timestamp_seconds{credential="legacy"} 1580515200"#))
        #expect(
            !metrics.contains(#"apns_worker_credential_expiry_timestamp_seconds{credential="demo"}"#),
            "a token key does not expire")

        let results = try await harness.results(30)
        let old = results.filter { $0.eventID?.hasPrefix("old-") == true }
        #expect(old.count == 10)
        #expect(
            old.allSatisfy { $0.outcome == .failed && $0.reason == "certificateExpired" && $0.attempts == 0 }, "\(old)")
        #expect(old.allSatisfy { $0.detail?.contains("2020-02-01T00:00:00Z") == true }, "\(old.first?.detail ?? "")")
        #expect(results.filter { $0.outcome == .delivered }.count == 20, "the other app runs on")
        let letters = try await harness.deadLetters(10)
        #expect(letters.allSatisfy { $0.headers.lastString(DeadLetterHeader.reason) == "credentials" })
        let records = harness.stack.simulator.observation.records
        #expect(
            records.count == 20 && !records.contains { $0.topic == legacy },
            "nothing was sent with the expired certificate")
        #expect(
            worker.assembly.registry.emitToString().contains(#"apns_worker_credentials_broken{credential="legacy"} 1"#))
        try await worker.stop()
    }

    // A new consumer group (or expired group offsets) on a topic with days of retention re-pushed
    // everything it held.
    @Test("records older than delivery.maxEventAge end expired without being sent; fresh ones are delivered")
    func staleEventsAreNotPushed() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.devices.policy = .accept
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let stale = (0..<10).map {
            Self.event("old-\($0)", token: 100 + $0, timestampMilliseconds: now - 7 * 3_600_000)
        }
        let fresh = (0..<10).map { Self.event("new-\($0)", token: 200 + $0, timestampMilliseconds: now - 60_000) }
        // One too large to parse at all: refused unread.
        let huge = KafkaProducerMessage(
            topic: EmbeddedStack.inputTopic, partition: 0, key: Array("huge".utf8),
            value: Array(repeating: UInt8(ascii: " "), count: 300 * 1024))
        try await harness.produce(stale + fresh + [huge])

        let worker = try harness.startWorker(group: "stale")
        let results = try await harness.results(21)
        try await worker.stop()
        let old = results.filter { $0.eventID?.hasPrefix("old-") == true }
        #expect(old.count == 10)
        #expect(old.allSatisfy { $0.outcome == .expired && $0.reason == "staleEvent" && $0.attempts == 0 })
        #expect(results.filter { $0.eventID?.hasPrefix("new-") == true }.allSatisfy { $0.outcome == .delivered })
        let sent = Set(simulator.observation.records.map(\.deviceToken))
        #expect(!sent.contains(String(format: "%064x", 100)), "a stale event never reached APNs")
        let refused = try #require(results.first { $0.sourceOffset == 20 })
        #expect(refused.outcome == .invalid && refused.reason == "recordTooLarge")
    }

    @Test("a fatal producer error stops the worker with that error, and its events are read again by the next one")
    func fatalProducerErrorStopsTheWorker() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.devices.policy = .accept
        simulator.faults.latency = .fixed(.milliseconds(300))
        try await harness.produce((0..<100).map { Self.event("f-\($0)", token: $0 + 1, partition: nil) })
        let worker = try harness.startWorker(group: "fatal", maxInFlight: 20)
        try await eventually(30, "events in flight") { worker.assembly.pipeline.inFlight > 0 }
        let producer = try #require(worker.assembly.pipeline.producerForTesting)
        producer.raiseFatalErrorForTesting("test: the broker broke the sequence")
        let outcome = await worker.task.result
        guard case .failure(let error) = outcome else {
            Issue.record("the worker ended without an error")
            return
        }
        #expect("\(error)".contains("the broker broke the sequence"), "\(error)")

        simulator.faults.latency = .none
        let next = try harness.startWorker(group: "fatal")
        let results = try await harness.results(100)
        try await next.stop()
        #expect(Set(results.compactMap(\.eventID)).count == 100, "every event ends with a result")
    }

    // A fatal producer error can come before the consumer exists (the idempotent producer's set-up
    // refused as it starts): the stop it begins found no consumer to close, and the worker then
    // read nothing, committed nothing and never ended.
    @Test("a stop begun before the consumer exists still ends the worker")
    func stopBeforeTheConsumerExists() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        try await harness.produce((0..<10).map { Self.event("s-\($0)", token: $0 + 1, partition: nil) })
        let configuration = try harness.stack.configuration(group: "early-stop", maxInFlight: 20)
        let assembly = try WorkerRuntime.assemble(configuration, logger: harness.logger)
        assembly.pipeline.beginShutdown()
        let serviceGroup = assembly.serviceGroup(handlingSignals: false)
        let ended = NIOLockedValueBox(false)
        let task = Task {
            defer { ended.withLockedValue { $0 = true } }
            try await serviceGroup.run()
        }
        do {
            try await eventually(30, "the worker ended") { ended.withLockedValue { $0 } }
        } catch {
            await serviceGroup.triggerGracefulShutdown()
            task.cancel()
            throw error
        }
        _ = await task.result
        #expect(assembly.pipeline.ownedPartitions == 0)
    }

    // SIGTERM while the reader waited at the in-flight bound under a 503 storm: the reader was
    // resumed only when half the events finished, so shutdown took minutes or never ended.
    @Test(
        "SIGTERM in a 503 storm at the in-flight bound: stopped within shutdownTimeout; the next worker loses nothing")
    func shutdownInAStorm() async throws {
        let harness = try await Harness.start()
        defer { Task { await harness.shutdown() } }
        let simulator = harness.stack.simulator
        simulator.devices.policy = .accept
        simulator.faults.setRate(.serviceUnavailable, 1.0)
        try await harness.produce((0..<300).map { Self.event("storm-\($0)", token: $0 + 1, partition: nil) })

        let stormy: (inout WorkerConfiguration) -> Void = { configuration in
            configuration.delivery.retry.maxAttempts = 1_000
            configuration.delivery.retry.maxRetryDuration = .seconds(600)
            configuration.delivery.shutdownTimeout = .seconds(6)
        }
        let worker = try harness.startWorker(group: "storm-stop", maxInFlight: 40, configure: stormy)
        try await eventually(30, "the reader waiting at the bound") {
            worker.assembly.pipeline.inFlight >= 40 && simulator.observation.count(status: 503) > 100
        }
        let stopping = ContinuousClock.now
        try await worker.stop()
        let took = ContinuousClock.now - stopping
        // Bounded by the 6 s shutdownTimeout, not by the retries' 600 s: the bound sits far from
        // both, so a slow machine's teardown cannot fail it.
        #expect(took < .seconds(30), "stopped in \(took) with a 6 s shutdownTimeout")
        // It left its group: readiness says so (it stayed "ok" for good once joined).
        #expect(worker.assembly.health.readiness.kafka == "consumer has not joined its group")
        let sentAtStop = simulator.observation.count(status: 503)
        try await Task.sleep(for: .seconds(2))
        #expect(simulator.observation.count(status: 503) == sentAtStop, "nothing is retried after the stop")

        // The storm ends; the next member reads what was not committed. Every event gets its result.
        simulator.faults.setRate(.serviceUnavailable, 0)
        let next = try harness.startWorker(group: "storm-stop")
        let results = try await harness.results(300, timeout: .seconds(120))
        try await next.stop()
        #expect(Set(results.compactMap(\.eventID)).count == 300)
        #expect(results.allSatisfy { $0.outcome == .delivered })
    }
}
