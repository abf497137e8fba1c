import Foundation
import Kafka
import Testing

@testable import Worker

func deadLetter(
    reason: String, source: String?, failedAt: String = "2026-11-22T03:14:07.512Z", replays: Int? = nil,
    value: [UInt8] = Array(#"{"id":"e1"}"#.utf8), key: [UInt8]? = Array("e1".utf8), offset: Int64 = 0
) -> KafkaConsumerMessage {
    var headers = [KafkaHeader(key: "traceparent", string: "00-abc-01"), KafkaHeader(key: "binary", value: [0, 255])]
    if let replays { headers.append(KafkaHeader(key: DeadLetterHeader.replayCount, string: String(replays))) }
    headers.append(KafkaHeader(key: DeadLetterHeader.reason, string: reason))
    headers.append(KafkaHeader(key: DeadLetterHeader.detail, string: "403 InvalidProviderToken"))
    if let source { headers.append(KafkaHeader(key: DeadLetterHeader.sourceTopic, string: source)) }
    headers.append(KafkaHeader(key: DeadLetterHeader.lastFailureAt, string: failedAt))
    return KafkaConsumerMessage(topic: "dlq", partition: 0, offset: offset, key: key, value: value, headers: headers)
}

@Suite("Replay decisions")
struct ReplayDecisionTests {
    @Test("a replayed record keeps key, value and original headers, drops dlq-* but its history, counts the replay")
    func replayedRecord() throws {
        let (row, message) = ReplayDecision.decide(
            deadLetter(reason: "credentials", source: "events"), request: ReplayRequest(deadLetterTopic: "dlq"))
        #expect(row == ReplayReport.Row(action: .replayed, reason: "credentials", destination: "events"))
        let replay = try #require(message)
        #expect(replay.topic == "events")
        #expect(replay.key == Array("e1".utf8))
        #expect(replay.value == Array(#"{"id":"e1"}"#.utf8))
        #expect(replay.headers.map(\.key) == ["traceparent", "binary", "dlq-replay-count", "dlq-history"])
        #expect(replay.headers.lastString("dlq-history") == "credentials@2026-11-22T03:14:07.512Z")
        #expect(replay.headers[1].value == [0, 255])
        #expect(replay.headers.lastString("dlq-replay-count") == "1")
        #expect(replay.partition == nil, "partitioned by key, as the original producer's record was")
    }

    @Test("the replay counter goes up and stops a poison event at the limit")
    func replayLimit() {
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.schema]
        request.maxReplays = 2
        let (_, second) = ReplayDecision.decide(
            deadLetter(reason: "schema", source: "events", replays: 1), request: request)
        #expect(second?.headers.lastString("dlq-replay-count") == "2")
        #expect(second?.headers.filter { $0.key == "dlq-replay-count" }.count == 1)
        let (row, third) = ReplayDecision.decide(
            deadLetter(reason: "schema", source: "events", replays: 2), request: request)
        #expect(third == nil)
        #expect(row.action == .refusedLimit)
    }

    @Test("filters on reason, source topic and failure time; a target topic overrides the source")
    func filters() {
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials]
        #expect(
            ReplayDecision.decide(deadLetter(reason: "schema", source: "events"), request: request).0.action
                == .filtered)
        #expect(
            ReplayDecision.decide(deadLetter(reason: "credentials", source: "events"), request: request).0.action
                == .replayed)

        request = ReplayRequest(deadLetterTopic: "dlq")
        request.sourceTopics = ["orders"]
        #expect(
            ReplayDecision.decide(deadLetter(reason: "credentials", source: "events"), request: request).0.action
                == .filtered)
        #expect(
            ReplayDecision.decide(deadLetter(reason: "credentials", source: nil), request: request).0.action
                == .filtered)

        request = ReplayRequest(deadLetterTopic: "dlq")
        request.since = DeadLetterTime.parse("2026-11-22T03:00:00Z")
        request.until = DeadLetterTime.parse("2026-11-22T04:00:00Z")
        #expect(
            ReplayDecision.decide(
                deadLetter(reason: "credentials", source: "e", failedAt: "2026-11-22T02:59:59.999Z"), request: request
            ).0.action == .filtered)
        #expect(
            ReplayDecision.decide(
                deadLetter(reason: "credentials", source: "e", failedAt: "2026-11-22T03:00:00Z"), request: request
            ).0.action == .replayed)
        #expect(
            ReplayDecision.decide(
                deadLetter(reason: "credentials", source: "e", failedAt: "2026-11-22T04:00:00.000Z"), request: request
            ).0.action == .filtered)
        #expect(
            ReplayDecision.decide(
                deadLetter(reason: "credentials", source: "e", failedAt: "yesterday"), request: request
            ).0.action == .filtered)

        request = ReplayRequest(deadLetterTopic: "dlq")
        request.targetTopic = "retry"
        let (row, message) = ReplayDecision.decide(deadLetter(reason: "credentials", source: nil), request: request)
        #expect(row.destination == "retry" && message?.topic == "retry")
        #expect(
            ReplayDecision.decide(
                deadLetter(reason: "credentials", source: nil), request: ReplayRequest(deadLetterTopic: "dlq")
            ).0.action == .noDestination)
    }

    @Test("replay names the same cursors from the worker's configuration file as from bare brokers")
    func cursorsFromEitherSettings() throws {
        // The worker's default group: a replay run with --bootstrap-servers and one with --config
        // of a configuration that keeps the default must resume from each other's cursors.
        let configuration = try WorkerConfiguration.parse(ConfigurationFixtures.minimalYAML)
        let fromFile = DeadLetterReplayer(configuration: configuration)
        let fromBrokers = DeadLetterReplayer(bootstrapServers: "kafka-0:9092")
        #expect(fromFile.cursorGroup(.credentials) == "apns-worker-replay.credentials")
        #expect(fromBrokers.cursorGroup(.credentials) == "apns-worker-replay.credentials")
        #expect(fromBrokers.consumerConfiguration.bootstrapServers == "kafka-0:9092")
        // A configuration's own group names its own cursors, and its Kafka settings come along.
        var pushers = configuration
        pushers.consumer.group = "pushers"
        pushers.kafka["security.protocol"] = "SASL_SSL"
        let replayer = DeadLetterReplayer(configuration: pushers)
        #expect(replayer.cursorGroup(.schema) == "pushers-replay.schema")
        #expect(replayer.consumerConfiguration.properties["security.protocol"] == "SASL_SSL")
        #expect(replayer.producerConfiguration.properties["security.protocol"] == "SASL_SSL")
    }

    @Test("a dry run produces nothing and says what it would do")
    func dryRun() {
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.dryRun = true
        let (row, message) = ReplayDecision.decide(
            deadLetter(reason: "credentials", source: "events"), request: request)
        #expect(message == nil)
        #expect(row.action == .wouldReplay)
    }
}

@Suite("Replay on the mock cluster", .timeLimit(.minutes(2)))
struct ReplayRunTests {
    @Test("replay re-produces the chosen dead letters to their source topics, and a dry run touches nothing")
    func replayRun() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["dlq", "events", "orders"] { try cluster.createTopic(topic, partitions: topic == "dlq" ? 2 : 1) }
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        for index in 0..<30 {
            let reason = index % 3 == 0 ? "schema" : "credentials"
            let source = index % 2 == 0 ? "events" : "orders"
            // Every fifth was replayed once before and failed again.
            let record = deadLetter(
                reason: reason, source: source, replays: index % 5 == 1 ? 1 : nil, value: Array("value-\(index)".utf8),
                key: Array("k\(index)".utf8))
            _ = try await producer.send(
                KafkaProducerMessage(
                    topic: "dlq", partition: Int32(index % 2), key: record.key, value: record.value,
                    headers: record.headers))
        }
        await producer.close()

        var consumerConfiguration = KafkaConsumerConfiguration(
            bootstrapServers: cluster.bootstrapServers, groupID: "replay")
        consumerConfiguration.sessionTimeout = .seconds(10)
        let replayer = DeadLetterReplayer(
            consumerConfiguration: consumerConfiguration,
            producerConfiguration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))

        var dry = ReplayRequest(deadLetterTopic: "dlq")
        dry.dryRun = true
        let dryReport = try await replayer.run(dry)
        #expect(dryReport.scanned == 30)
        #expect(dryReport.count(.wouldReplay) == 20, "schema dead letters are replayed only when named")
        #expect(dryReport.count(.filtered) == 10)

        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials]
        let report = try await replayer.run(request)
        #expect(report.scanned == 30)
        #expect(report.count(.replayed) == 20)
        #expect(report.count(.filtered) == 10)
        #expect(report.counts[ReplayReport.Row(action: .replayed, reason: "credentials", destination: "events")] == 10)
        #expect(report.table.contains("replayed"))
        // A cron job's output shows a loop: 4 of the credentials dead letters (1, 11, 16, 26) had
        // been replayed before.
        #expect(dryReport.failedAgain.values.reduce(0, +) == 4 + 2, "and 2 schema ones: \(dryReport.table)")
        #expect(report.failedAgain.filter { $0.key.action == .replayed }.values.reduce(0, +) == 4, "\(report.table)")
        #expect(report.table.contains("note: 4 of the dead letters replayed had failed again after an earlier replay"))

        // What arrived: exactly the 20 credential failures, bytes intact, counted once.
        var check = KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "check")
        check.sessionTimeout = .seconds(10)
        let reader = try KafkaConsumer(configuration: check)
        try reader.assign([
            KafkaTopicPartitionOffset(topic: "events", partition: 0, offset: KafkaOffset.beginning),
            KafkaTopicPartitionOffset(topic: "orders", partition: 0, offset: KafkaOffset.beginning),
        ])
        var received: [KafkaConsumerMessage] = []
        for try await record in reader.messages {
            received.append(record)
            if received.count == 20 { break }
        }
        #expect(try await reader.watermarks(of: KafkaTopicPartition(topic: "events", partition: 0)).high == 10)
        #expect(try await reader.watermarks(of: KafkaTopicPartition(topic: "orders", partition: 0)).high == 10)
        await reader.close()
        for record in received {
            let index = Int(String(decoding: record.value ?? [], as: UTF8.self).dropFirst("value-".count))!
            #expect(index % 3 != 0, "only credential failures")
            #expect(record.topic == (index % 2 == 0 ? "events" : "orders"))
            #expect(record.key == Array("k\(index)".utf8))
            #expect(record.headers.lastString("dlq-replay-count") == (index % 5 == 1 ? "2" : "1"))
            #expect(record.headers.lastString("dlq-reason") == nil)
            #expect(record.headers.lastString("traceparent") == "00-abc-01")
        }

        // The same replay again: everything was replayed, so nothing is; --from-beginning replays again.
        let again = try await replayer.run(request)
        #expect(again.count(.replayed) == 0, "a second run replays nothing: \(again.table)")
        var everything = request
        everything.fromBeginning = true
        everything.dryRun = true
        #expect(try await replayer.run(everything).count(.wouldReplay) == 20)
    }

    /// A mock cluster whose one-partition "dlq" topic holds a dead letter from "events" per reason
    /// given (offsets 0, 1, …), and a replayer for it that checkpoints every 2 records.
    static func deadLetterTopic(reasons: [String]) async throws -> (KafkaMockCluster, DeadLetterReplayer) {
        let cluster = try KafkaMockCluster(brokers: 1)
        for topic in ["dlq", "events"] { try cluster.createTopic(topic, partitions: 1) }
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        for (index, reason) in reasons.enumerated() {
            let record = deadLetter(reason: reason, source: "events", offset: Int64(index))
            _ = try await producer.send(
                KafkaProducerMessage(topic: "dlq", key: record.key, value: record.value, headers: record.headers))
        }
        await producer.close()
        var replayer = DeadLetterReplayer(
            consumerConfiguration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "r"),
            producerConfiguration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        replayer.checkpointInterval = 2
        return (cluster, replayer)
    }

    @Test("a cursor Kafka will not store stops the run part-way: a replay failure (exit 1), not a usage error")
    func failedCheckpointIsPartWay() async throws {
        let (cluster, replayer) = try await Self.deadLetterTopic(reasons: Array(repeating: "credentials", count: 4))
        cluster.failNextRequests(.offsetCommit, with: Array(repeating: .topicAuthorizationFailed, count: 50))
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials]
        do {
            let report = try await replayer.run(request)
            Issue.record("the run ended as if its cursor were stored: \(report.table)")
        } catch let error as DeadLetterReplayer.ReplayError {
            #expect(!error.isUsageError, "\(error)")
            #expect(error.description.contains("TOPIC_AUTHORIZATION_FAILED"), "\(error)")
        }
    }

    @Test("each reason keeps its own cursor, moved at every checkpoint; schema dead letters only when named")
    func resumeAndNamedReasons() async throws {
        let (cluster, replayer) = try await Self.deadLetterTopic(
            reasons: Array(repeating: "credentials", count: 5) + Array(repeating: "schema", count: 5))

        var credentials = ReplayRequest(deadLetterTopic: "dlq")
        credentials.reasons = [.credentials]
        #expect(try await replayer.run(credentials).count(.replayed) == 5)
        // Naming schema now replays the schema ones, which the credentials run passed over.
        var schema = ReplayRequest(deadLetterTopic: "dlq")
        schema.reasons = [.schema]
        #expect(try await replayer.run(schema).count(.replayed) == 5)
        #expect(try await replayer.run(schema).count(.replayed) == 0)
        let second = try await replayer.run(credentials)
        #expect(second.scanned == 0, "the credentials cursor is at the end")
        // A reason without a cursor makes the run read from the start: the credentials dead letters
        // it passes are not replayed again.
        var both = ReplayRequest(deadLetterTopic: "dlq")
        both.reasons = [.credentials, .retriesExhausted]
        let third = try await replayer.run(both)
        #expect(third.scanned == 10)
        #expect(third.count(.replayedBefore) == 5)
        #expect(third.count(.replayed) == 0)
        withExtendedLifetime(cluster) {}  // the brokers outlive the runs
    }

    /// A mock cluster whose two-partition "dlq" topic holds `count` credentials dead letters, the
    /// i-th from topic A, B or C (i % 3), failed at 03:00 (even i) or 05:00 (odd i), value "dl-i";
    /// and a replayer that checkpoints every 4 records.
    static func threeSources(count: Int) async throws -> (KafkaMockCluster, DeadLetterReplayer) {
        let cluster = try KafkaMockCluster(brokers: 1)
        try cluster.createTopic("dlq", partitions: 2)
        for topic in ["A", "B", "C"] { try cluster.createTopic(topic, partitions: 1) }
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        for index in 0..<count {
            let record = deadLetter(
                reason: "credentials", source: ["A", "B", "C"][index % 3],
                failedAt: index % 2 == 0 ? "2026-11-22T03:00:00Z" : "2026-11-22T05:00:00Z",
                value: Array("dl-\(index)".utf8), key: Array("k\(index)".utf8))
            _ = try await producer.send(
                KafkaProducerMessage(
                    topic: "dlq", partition: Int32(index % 2), key: record.key, value: record.value,
                    headers: record.headers))
        }
        await producer.close()
        var replayer = DeadLetterReplayer(
            consumerConfiguration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "r"),
            producerConfiguration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        replayer.checkpointInterval = 4
        return (cluster, replayer)
    }

    /// The values in `topic` (one partition), as replayed so far.
    /// Two runs at once never both replay: normally one replays and the other is refused; runs whose
    /// writes crossed are both refused; a run whose reservation a late store of the other came over stops
    /// part-way at its next checkpoint ("taken over"). Returns the refusals.
    static func neverBoth(
        _ results: [Result<ReplayReport, any Error>], sourceLocation: SourceLocation = #_sourceLocation
    ) -> [String] {
        let reports = results.compactMap { try? $0.get() }
        let refusals = results.compactMap { result -> String? in
            guard case .failure(let error) = result else { return nil }
            return "\(error)"
        }
        #expect(reports.count <= 1, "both runs replayed", sourceLocation: sourceLocation)
        #expect(
            refusals.allSatisfy {
                ($0.contains("another replay run") && $0.contains("nothing was replayed")) || $0.contains("taken over")
            }, "\(refusals)", sourceLocation: sourceLocation)
        return refusals
    }

    static func values(in topic: String, on cluster: KafkaMockCluster) async throws -> [String] {
        let reader = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "check"))
        defer { Task { await reader.close() } }
        let partition = KafkaTopicPartition(topic: topic, partition: 0)
        let end = try await reader.watermarks(of: partition).high
        guard end > 0 else { return [] }
        try reader.assign([KafkaTopicPartitionOffset(partition, offset: KafkaOffset.beginning)])
        var values: [String] = []
        for try await record in reader.messages {
            values.append(String(decoding: record.value ?? [], as: UTF8.self))
            if record.offset + 1 >= end { break }
        }
        return values
    }

    // The cursor used to move past every record a run read: a dead letter skipped by --source-topic
    // (or --since, the replay limit, no destination) was "replayed before" for every later run.
    @Test("a filtered run leaves what it filtered replayable: A, then B, then everything else, each dead letter once")
    func filteredRunsLeaveTheRest() async throws {
        let (cluster, replayer) = try await Self.threeSources(count: 30)
        var onlyA = ReplayRequest(deadLetterTopic: "dlq")
        onlyA.sourceTopics = ["A"]
        #expect(try await replayer.run(onlyA).count(.replayed) == 10)
        var onlyB = ReplayRequest(deadLetterTopic: "dlq")
        onlyB.sourceTopics = ["B"]
        let b = try await replayer.run(onlyB)
        #expect(b.count(.replayed) == 10, "\(b.table)")
        let row = { (action: ReplayReport.Action, topic: String) in
            ReplayReport.Row(action: action, reason: "credentials", destination: topic)
        }
        #expect(b.counts[row(.replayedBefore, "B")] == nil, "A's run replayed none of B's: \(b.table)")
        // Only the later half of C (failed at 05:00), then everything: the earlier half of C.
        var laterC = ReplayRequest(deadLetterTopic: "dlq")
        laterC.since = DeadLetterTime.parse("2026-11-22T04:00:00Z")
        let later = try await replayer.run(laterC)
        #expect(later.count(.replayed) == 5, "\(later.table)")
        let rest = try await replayer.run(ReplayRequest(deadLetterTopic: "dlq"))
        #expect(rest.count(.replayed) == 5, "exactly what the filtered runs skipped: \(rest.table)")
        #expect(rest.counts[row(.replayed, "C")] == 5, "\(rest.table)")
        #expect(try await replayer.run(ReplayRequest(deadLetterTopic: "dlq")).count(.replayed) == 0)

        for (topic, residue) in [("A", 0), ("B", 1), ("C", 2)] {
            let values = try await Self.values(in: topic, on: cluster)
            #expect(
                values.sorted() == (0..<30).filter { $0 % 3 == residue }.map { "dl-\($0)" }.sorted(),
                "\(topic): every dead letter of it once")
        }
    }

    @Test("two runs at once over the same cursors: one replays, the other is refused, nothing is replayed twice")
    func concurrentRuns() async throws {
        let (cluster, replayer) = try await Self.threeSources(count: 300)
        var first = replayer
        // Runs whose writes crossed are both refused, and each gives its reservation up at once only if
        // storing it took less than the settle: on a loaded machine (the whole suite at once) that
        // took more than the default second, and the last run below would wait for a reservation to lapse.
        first.reservationSettle = .seconds(5)
        // Should storing still take longer (a CI run beside other work measured 3.6 s), the slower
        // refused run leaves its reservation to lapse: short here, so that the last run below waits for it.
        first.reservationDuration = .seconds(30)
        first.runID = "first-run"
        var second = first
        second.runID = "second-run"
        let request = ReplayRequest(deadLetterTopic: "dlq")
        func attempt(_ replayer: DeadLetterReplayer) async -> Result<ReplayReport, any Error> {
            do { return .success(try await replayer.run(request)) } catch { return .failure(error) }
        }
        async let one = attempt(first)
        async let two = attempt(second)
        let refusals = Self.neverBoth(await [one, two])
        var replayed: [String] = []
        for topic in ["A", "B", "C"] { replayed += try await Self.values(in: topic, on: cluster) }
        #expect(Set(replayed).count == replayed.count, "no dead letter replayed twice")
        // Whatever was left, a run alone finishes: every dead letter replayed once. A run stopped
        // part-way produced up to a checkpoint's worth past its last stored cursor, which the next
        // run replays again (at least once, as documented).
        let lapse = ContinuousClock.now + .seconds(45)
        while true {
            do {
                _ = try await first.run(request)
                break
            } catch  where "\(error)".contains("holds") && ContinuousClock.now < lapse {
                try await Task.sleep(for: .seconds(1))  // a refused run's reservation, left to lapse
            }
        }
        replayed = []
        for topic in ["A", "B", "C"] { replayed += try await Self.values(in: topic, on: cluster) }
        let partWay = refusals.contains { $0.contains("taken over") }
        #expect(Set(replayed).count == 300, "every dead letter replayed")
        #expect(replayed.count - 300 <= (partWay ? first.checkpointInterval : 0), "each dead letter once")
    }

    @Test("a run that died with the cursors reserved blocks the next until its reservation expires, naming it")
    func heldCursors() async throws {
        let (cluster, replayer) = try await Self.threeSources(count: 6)
        let holder = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: replayer.cursorGroup(.credentials)))
        func reserve(expiringIn seconds: Double) async throws {
            let expires = Int64((Date().timeIntervalSince1970 + seconds) * 1000)
            let metadata = CommitMetadata(
                committed: 0, reservation: CommitMetadata.Reservation(holder: "pod-3:41:7", expires: expires))
            try await holder.commit(
                (0..<2).map {
                    KafkaTopicPartitionOffset(
                        KafkaTopicPartition(topic: "dlq", partition: $0), offset: 0, metadata: metadata.encoded().text)
                })
        }
        try await reserve(expiringIn: 60)
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials]
        let error = await #expect(throws: DeadLetterReplayer.ReplayError.self) { try await replayer.run(request) }
        #expect(error?.description.contains("another replay run (pod-3:41:7)") == true, "\(String(describing: error))")
        #expect(try await Self.values(in: "A", on: cluster).isEmpty)
        // A dry run reads without holding: it is not refused.
        var dry = request
        dry.dryRun = true
        #expect(try await replayer.run(dry).count(.wouldReplay) == 6)
        try await reserve(expiringIn: -1)
        #expect(try await replayer.run(request).count(.replayed) == 6)
        await holder.close()
    }

    @Test("a dead-letter or target topic that does not exist is an error, and is not created")
    func missingTopic() async throws {
        let cluster = try KafkaMockCluster(brokers: 1)
        try cluster.createTopic("dlq", partitions: 1)
        let replayer = DeadLetterReplayer(
            consumerConfiguration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "r"),
            producerConfiguration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        for request in [
            ReplayRequest(deadLetterTopic: "no-such-topic"),
            {
                var request = ReplayRequest(deadLetterTopic: "dlq")
                request.targetTopic = "no-such-target"
                return request
            }(),
        ] {
            let error = await #expect(throws: DeadLetterReplayer.ReplayError.self) { try await replayer.run(request) }
            #expect(error?.isUsageError == true)
            #expect(error?.description.contains("does not exist") == true)
        }
        let reader = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: "check"))
        #expect(try await !reader.topicNames().contains("no-such-topic"))
        await reader.close()
    }
}

@Suite("Dead-letter reasons as users write them")
struct DeadLetterReasonSpellingTests {
    @Test("replay --reason takes the dlq-reason or the result's spelling of the same reason, never a category's member")
    func spellings() {
        for reason in DeadLetterReason.allCases { #expect(DeadLetterReason(spelling: reason.rawValue) == reason) }
        #expect(DeadLetterReason(spelling: "malformedJSON") == .malformedJSON)
        #expect(DeadLetterReason(spelling: "recordTooLarge") == .recordTooLarge)
        #expect(DeadLetterReason(spelling: "noCredentialForTopic") == .noCredential)
        #expect(DeadLetterReason(spelling: "payloadTooLarge") == nil, "one rule is not every rule")
        #expect(DeadLetterReason(spelling: "BadDeviceToken") == nil)
    }
}
