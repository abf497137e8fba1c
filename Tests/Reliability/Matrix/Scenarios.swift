import APNsSimulator
import Foundation
import Kafka
import TestPeers
import Worker
import WorkerDemo

extension Scenario {
    /// Every scenario of the matrix, in the order the table lists them.
    package static let all: [Scenario] = kafka + apns + process + [fleet, keyRotation, newKeyUnderFixedID]

    /// The short run `make test` includes: one of each kind of fault, each on the broker where only a
    /// real peer shows it. The pipeline's own decisions under rebalances, losses, crashes and refused
    /// commits, on a broker that keeps commit metadata and on one that drops it, are the
    /// deterministic simulation's (Tests/SimulationTests, thousands of interleavings a run); what
    /// stays here is real librdkafka, real processes and real brokers: every connection reset and
    /// refused and then back (Tansu behind its proxy), a revocation's callbacks in a retry storm on the mock, a SIGKILL with the
    /// progress topic on Tansu, and with lanes (two group members in one process) on the mock.
    package static let quick: [(name: String, brokers: [Broker])] = [
        ("Kafka unreachable, then back", [.tansu]), ("rebalance in a retry storm", [.mock]),
        ("APNs path black-holed", [.mock]), ("SIGKILL at random points", [.tansu]),
        ("SIGKILL at random points, with lanes", [.mock]), ("a token key rotated while events flow", [.mock]),
        ("a new key under a fixed keyId", [.mock]),
    ]

    // MARK: Kafka

    static let kafka: [Scenario] = [
        Scenario(
            "Kafka unreachable, then back", .kafka,
            shows: """
                The broker goes away for 30 s (Tansu: every connection reset and refused at the proxy; \
                mock: the broker taken down) while events are in flight. Results wait in the producer, \
                offsets are not committed, and everything flows again when it is back.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 5)
            try await rig.setKafkaReachable(false)
            try await Task.sleep(for: scale.seconds(30))
            try await rig.setKafkaReachable(true)
            rig.faultCleared()
        },
        Scenario(
            "Kafka path black-holed, then healed", .kafka, brokers: [.tansu],
            shows: """
                For 20 s no byte crosses between the clients and Tansu and nothing closes (the proxy \
                stops reading both ways): librdkafka's request time-outs, not a closed socket, must \
                notice; the session expires; once healed, the group re-forms and the backlog drains.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 5)
            let heal = try await rig.requireTansu().proxy.partition(for: scale.seconds(20))
            await heal.value
            rig.faultCleared()
        },
        Scenario(
            "Kafka connections reset", .kafka, brokers: [.tansu],
            shows: """
                Every connection to the broker is reset (RST) every 3 s, five times, mid-run: \
                producer, consumer and group coordinator reconnect; in-flight requests are retried.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 10)
            for _ in 0..<5 {
                try await rig.requireTansu().proxy.cutConnections()
                try await Task.sleep(for: .seconds(3))
            }
            rig.faultCleared()
        },
        Scenario(
            "Kafka network slow", .kafka, brokers: [.tansu],
            shows: """
                150 ms added each way on every connection to the broker for the whole run (a \
                cross-region link): fetches, produces and commits are slow; nothing times out or repeats.
                """
        ) { rig, scale in
            try await rig.requireTansu().proxy.setLatency(.milliseconds(150))
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            rig.faultCleared()
        },
        brokerRestart(SIGTERM),
        brokerRestart(SIGKILL),
        Scenario(
            "TLS to the broker", .kafka, brokers: [.tansu],
            shows: """
                The worker reaches Kafka over TLS (security.protocol SSL, ssl.ca.location; the host \
                name checked): Tansu behind a TLS-terminating proxy with a certificate from a CA made \
                for the run. Nothing else breaks: TLS loses and repeats nothing.
                """
        ) { rig, scale in
            let tansu = try rig.requireTansu()
            // In the stack's directory: removed with it, after the worker has stopped.
            let material = try BrokerTLSMaterial(under: rig.stack.directory)
            // The rig's own readers stay plain.
            try await tansu.proxy.setSecurity(
                ProxySecurity(tls: .init(server: material.server), admitsPlainClients: true))
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker { $0.kafka.merge(material.clientProperties()) { $1 } }
            rig.faultCleared()
            try await rig.waitForResults(scale.events / 10)
            let statistics = await tansu.proxy.currentStatistics
            guard statistics.tlsAccepted > 0, statistics.tlsRefused == 0 else {
                throw ScenarioFailure("the worker's TLS: \(statistics.tlsAccepted) accepted, \(statistics.tlsErrors)")
            }
        },
        Scenario(
            "coordinator errors", .kafka, brokers: [.mock],
            shows: """
                FindCoordinator, Heartbeat and OffsetCommit answer NOT_COORDINATOR / \
                COORDINATOR_NOT_AVAILABLE for a while: the group finds its coordinator again and commits.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 5)
            let mock = try rig.requireMock()
            mock.failNextRequests(.findCoordinator, with: Array(repeating: .coordinatorNotAvailable, count: 10))
            mock.failNextRequests(.heartbeat, with: Array(repeating: .notCoordinator, count: 5))
            mock.failNextRequests(.offsetCommit, with: Array(repeating: .notCoordinator, count: 10))
            rig.faultCleared()
        },
        Scenario(
            "produce errors on the results topic", .kafka, brokers: [.mock],
            shows: """
                Produce requests fail with NOT_LEADER_FOR_PARTITION and REQUEST_TIMED_OUT: librdkafka \
                retries them; no result is dropped and no offset passes an unpublished result.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            // One produce request in flight per connection. librdkafka 2.0.2's mock cluster does not
            // check an idempotent producer's sequence numbers the way a broker does: with several
            // requests in flight, it stores the ones after a failed request (a broker refuses them
            // as out of order), and the failed request's retry is then answered as a duplicate and
            // reported delivered although never stored. (Newer librdkafka mocks fixed this.)
            _ = try rig.startWorker { $0.producer.properties["max.in.flight.requests.per.connection"] = "1" }
            try await rig.waitForResults(scale.events / 10)
            let mock = try rig.requireMock()
            mock.failNextRequests(
                .produce,
                with: Array(repeating: .notLeaderForPartition, count: 10)
                    + Array(repeating: .requestTimedOut, count: 10))
            rig.faultCleared()
        },
        Scenario(
            "commit failures", .kafka, brokers: [.mock],
            shows: """
                Twenty offset commits in a row fail (REQUEST_TIMED_OUT, then REBALANCE_IN_PROGRESS): \
                the next commit carries the same offsets, so nothing is skipped.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 10)
            try rig.requireMock().failNextRequests(
                .offsetCommit,
                with: Array(repeating: .requestTimedOut, count: 10) + Array(repeating: .rebalanceInProgress, count: 10))
            rig.faultCleared()
        },
        Scenario(
            "leader changes", .kafka, brokers: [.mock], mockBrokers: 3,
            shows: """
                Every partition's leader moves between three brokers every 2 s, five times, mid-run: \
                fetches and produces follow the leader.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 10)
            let mock = try rig.requireMock()
            for round in 0..<5 {
                for topic in [EmbeddedStack.inputTopic, EmbeddedStack.resultsTopic] {
                    for partition in 0..<4 {
                        try mock.setLeader(
                            topic: topic, partition: Int32(partition), broker: Int32((partition + round) % 3 + 1))
                    }
                }
                try await Task.sleep(for: .seconds(2))
            }
            rig.faultCleared()
        },
        Scenario(
            "rebalance in a retry storm", .kafka,
            shows: """
                APNs answers 503 to 60% of requests; a second worker joins and the first leaves while \
                retries are waiting. Revocation waits for (or hands back) what is in flight.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.simulator.faults.setRate(.serviceUnavailable, 0.6)
            rig.pace()
            let first = try rig.startWorker(maxInFlight: 20)
            try await rig.waitForResults(scale.events / 10)
            let second = try rig.startWorker(maxInFlight: 20)
            try await rig.waitUntil(60, "the second worker to own partitions") {
                second.assembly.pipeline.ownedPartitions > 0
            }
            try await first.stop()
            rig.simulator.faults.setRate(.serviceUnavailable, 0)
            rig.faultCleared()
        },
        Scenario(
            "three workers, members joining and leaving", .kafka,
            shows: """
                Three workers share the group; one leaves, another joins, a third leaves, while \
                events flow: each move is a rebalance with work in flight.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events * 3).records)
            rig.pace()
            let a = try rig.startWorker()
            let b = try rig.startWorker()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 5)
            try await b.stop()
            let d = try rig.startWorker()
            try await rig.waitUntil(60, "the newcomer to own partitions") { d.assembly.pipeline.ownedPartitions > 0 }
            try await a.stop()
            rig.faultCleared()
        },
        Scenario(
            "records too large to publish as they are", .kafka,
            shows: """
                Events of 100-200 KB that fail (not JSON) cannot be dead-lettered whole when the \
                producer's message.max.bytes is 64 KB: the dead letter goes out reduced (headers and \
                sizes, no original bytes), with its result, and nothing stops.
                """
        ) { rig, scale in
            var records = rig.mixedBatch(scale.events / 2).records
            for index in 0..<50 {
                records.append(
                    KafkaProducerMessage(
                        topic: EmbeddedStack.inputTopic, key: Array("large-\(index)".utf8),
                        value: Array(repeating: UInt8(ascii: "x"), count: 100_000 + index * 2_000)))
            }
            try await rig.produce(records)
            _ = try rig.startWorker { $0.producer.properties["message.max.bytes"] = "65536" }
            try await rig.waitUntil(60, "the reduced dead letters") {
                rig.deadLetters.snapshot.seen.values.filter(\.degraded).count >= 50
            }
        },
    ]

    // MARK: APNs

    static let apns: [Scenario] = [
        storm("503 storm", .serviceUnavailable, rate: 0.7),
        storm("500 storm", .internalServerError, rate: 0.7),
        Scenario(
            "429 storm on one device token", .apns,
            shows: """
                One device token gets 300 events and 40 TooManyRequests in a row: its events back off \
                (and fail after their attempts with a dead letter); other devices are not held up.
                """
        ) { rig, scale in
            let hot = String(repeating: "ab", count: 32)
            rig.simulator.devices.register(hot)
            rig.simulator.faults.script(deviceToken: hot, Array(repeating: .tooManyRequests, count: 40) + [nil])
            var records = rig.mixedBatch(scale.events).records
            records += (0..<300).map { Samples.alert(id: Samples.eventID(1, $0), deviceToken: hot) }
            try await rig.produce(records)
            rig.pace()
            _ = try rig.startWorker()
            rig.faultCleared()
        },
        appStorm,
        connectionFault(
            "GOAWAY every 100 requests",
            shows:
                "Every connection is told to go away after 100 requests: streams above the last id are retried on a new one."
        ) { $0.goAwayAfter = 100 },
        connectionFault(
            "abrupt close",
            shows: "Every connection is closed without GOAWAY on its 150th request: what was in flight is retried."
        ) { $0.closeAfter = 150 },
        Scenario(
            "latency past the request deadline", .apns,
            shows: """
                For 8 s APNs answers after 3 s, past the worker's 2 s request deadline: the requests \
                time out and are retried; answers that come late are not counted twice.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker { $0.apns.requestTimeout = .seconds(2) }
            try await rig.waitForResults(scale.events / 10)
            rig.simulator.faults.latency = .fixed(.seconds(3))
            try await Task.sleep(for: .seconds(8))
            rig.pace()
            rig.faultCleared()
        },
        Scenario(
            "MAX_CONCURRENT_STREAMS dropping to 1", .apns,
            shows: """
                For 10 s every connection's MAX_CONCURRENT_STREAMS is 1 (a SETTINGS frame mid-run, as \
                APNs sends under load): the pool queues requests instead of failing them, then widens \
                again.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 10)
            rig.simulator.setMaxConcurrentStreams(1)
            try await Task.sleep(for: scale.seconds(10))
            rig.simulator.setMaxConcurrentStreams(1000)
            rig.faultCleared()
        },
        Scenario(
            "APNs path black-holed", .apns,
            shows: """
                For 15 s no byte crosses between the worker and APNs and nothing closes: PING \
                time-outs and request deadlines notice, connections are replaced once the path heals.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 5)
            await rig.apnsProxy.setBlackHole(true)
            try await Task.sleep(for: scale.seconds(15))
            await rig.apnsProxy.setBlackHole(false)
            rig.faultCleared()
        },
        Scenario(
            "APNs simulator killed and restarted", .apns,
            shows: """
                The simulator stops (every connection drops, the port refuses) and a new one starts 5 s \
                later: connection attempts back off, then the pool reconnects.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.simulator.devices.policy = .accept
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 5)
            try await rig.restartSimulator(after: scale.seconds(5))
            rig.faultCleared()
        },
        Scenario(
            "credentials rejected, fixed, replayed", .apns,
            shows: """
                A key APNs does not know: every event fails 403 InvalidProviderToken and is \
                dead-lettered. With the right key, the dead letters are replayed and every event ends \
                delivered.
                """
        ) { rig, scale in
            rig.simulator.devices.policy = .accept
            let count = scale.events / 4
            try await rig.produce(
                (0..<count).map { Samples.alert(id: Samples.eventID(2, $0), deviceToken: Samples.deviceToken($0 + 1)) })
            let unknownKey = try Samples.unknownKeyFile(in: rig.stack.directory)
            let broken = try rig.startWorker { Samples.use(key: unknownKey, in: &$0) }
            try await rig.waitUntil(120, "every event dead-lettered") { rig.deadLetters.snapshot.seen.count >= count }
            try await broken.stop()
            _ = try rig.startWorker()
            var request = ReplayRequest(deadLetterTopic: EmbeddedStack.deadLetterTopic)
            request.reasons = [.credentials]
            let report = try await DeadLetterReplayer(
                consumerConfiguration: KafkaConsumerConfiguration(
                    bootstrapServers: rig.bootstrapServers, groupID: "replay"),
                producerConfiguration: KafkaProducerConfiguration(bootstrapServers: rig.bootstrapServers),
                logger: rig.logger
            ).run(request)
            guard report.count(.replayed) == count else {
                throw ScenarioFailure("replayed \(report.count(.replayed)) of \(count) dead letters")
            }
            rig.faultCleared()
            try await rig.waitUntil(120, "every replayed event delivered") {
                rig.results.snapshot.seen.values.filter { $0.outcome == .delivered }.count >= count
            }
        },
    ]

    /// Tansu on S3 stopped mid-run with `signal` and started again on the same port.
    static func brokerRestart(_ signal: Int32) -> Scenario {
        let name = signal == SIGKILL ? "SIGKILL" : "SIGTERM"
        let how =
            signal == SIGKILL
            ? "SIGKILLed (nothing of its shutdown runs)"
            : "stopped with SIGTERM (its connections closed, as a broker that shuts down closes them; it exits 0)"
        return Scenario(
            "broker restarts with its data (\(name))", .kafka, brokers: [.tansu], tansuStorage: .s3,
            shows: """
                Tansu keeps its data on S3 (a moto server): mid-run it is \(how) and started again on \
                the same port 5 s later. Every client reconnects; the broker comes back with the input, \
                the results so far and the group's committed offsets, so the group resumes where it \
                committed: what it had not committed is processed again, nothing is lost.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 5)
            let stop = try await rig.requireTansu().restart(signal: signal, downtime: scale.seconds(5))
            rig.logger.notice("Tansu restarted", metadata: ["stop": "\(stop)"])
            if stop.killedAfterGrace || (signal == SIGTERM && stop.exitStatus != 0) {
                throw ScenarioFailure("Tansu did not exit cleanly on \(name): \(stop)")
            }
            rig.faultCleared()
        }
    }

    /// Two workers share a burst; one is SIGKILLed a third of the way through.
    static func burstKill(faults: Bool) -> Scenario {
        Scenario(
            faults
                ? "SIGKILL under a burst, APNs at 20-200 ms with faults" : "SIGKILL under a burst, APNs at 20-200 ms",
            .process, partitions: 8,
            shows: """
                Two `apns-worker run` processes (up to 1,000 events in flight each, or `--max-in-flight N`; \
                the default commit interval) share 8 partitions and a backlog of 10,000 events (2,000 quick; `--backlog N` \
                sets it) while APNs answers after 20-200 ms\(faults ? ", 5% of requests get 503 and 2% get 429, and every connection is told to go away after 700 requests" : ""); \
                one is SIGKILLed once a third of the events have results, and a third worker joins. What \
                the killed worker had not committed is sent again: at best only the pushes APNs had not \
                answered at the kill (the floor).
                """
        ) { rig, scale in
            let records = rig.mixedBatch(scale.backlog).records
            rig.pace(.uniform(.milliseconds(20), .milliseconds(200)))
            if faults {
                rig.simulator.faults.setRate(.serviceUnavailable, 0.05)
                rig.simulator.faults.setRate(.tooManyRequests, 0.02)
                var connection = rig.simulator.faults.connection
                connection.goAwayAfter = 700
                rig.simulator.faults.connection = connection
            }
            let maxInFlight = scale.maxInFlight ?? 1_000
            let killed = try rig.startProcess(maxInFlight: maxInFlight)
            _ = try rig.startProcess(maxInFlight: maxInFlight)
            // Both in the group before the burst: its first events trickle in until both workers push
            // (a worker opens its two APNs connections on its first push). Otherwise the first to join
            // could take the whole burst while the other waits for its assignment.
            var trickled = 0
            let deadline = ContinuousClock.now + .seconds(90)
            while rig.simulator.observation.liveConnections < 4 {
                guard ContinuousClock.now < deadline else { throw ScenarioFailure("the pair never both pushed") }
                if let exited = rig.exitedOnItsOwn() { throw ScenarioFailure(exited) }
                let end = min(trickled + 8, records.count / 10)
                if trickled < end {
                    try await rig.produce(Array(records[trickled..<end]))
                    trickled = end
                }
                try await Task.sleep(for: .milliseconds(500))
            }
            try await rig.produce(Array(records[trickled...]))
            try await rig.waitForResults(scale.backlog / 3, within: 180)
            await rig.sigkill(killed)
            _ = try rig.startProcess(maxInFlight: maxInFlight)
            rig.faultCleared()
        }
    }

    /// A fault of every APNs connection, for the whole run.
    static func connectionFault(
        _ name: String, shows: String, _ set: @escaping @Sendable (inout FaultInjector.ConnectionFaults) -> Void
    ) -> Scenario {
        Scenario(name, .apns, shows: shows) { rig, scale in
            var faults = rig.simulator.faults.connection
            set(&faults)
            rig.simulator.faults.connection = faults
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            rig.faultCleared()
        }
    }

    static func storm(_ name: String, _ reason: SimulatorReason, rate: Double) -> Scenario {
        Scenario(
            name, .apns,
            shows: """
                For 10 s APNs answers \(reason) to \(Int(rate * 100))% of \
                requests: the worker backs off and retries; events out of attempts end failed with a \
                dead letter.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.pace()
            _ = try rig.startWorker()
            try await rig.waitForResults(scale.events / 10)
            rig.simulator.faults.setRate(reason, rate)
            try await Task.sleep(for: .seconds(10))
            rig.simulator.faults.setRate(reason, 0)
            rig.faultCleared()
        }
    }

    // MARK: Process

    /// `apns-worker run` SIGKILLed at random moments and restarted; `lanes`: with an urgent lane
    /// taking a quarter of the events.
    static func sigkillAtRandomPoints(lanes: Bool) -> Scenario {
        Scenario(
            lanes ? "SIGKILL at random points, with lanes" : "SIGKILL at random points", .process, lanes: lanes,
            shows: lanes
                ? """
                The same with an urgent lane (`consumer.lanes.urgent`): each `apns-worker run` is two \
                members of the group, one per lane, and a kill takes both; a quarter of the events \
                are on the urgent topic. None is lost.
                """
                : """
                `apns-worker run` is SIGKILLed at a random moment and restarted, 10 times over one \
                run: uncommitted events are processed again (duplicates), none is lost.
                """
        ) { rig, scale in
            try await rig.produce(
                rig.mixedBatch(scale.events * 3).records + (lanes ? rig.urgentBatch(scale.events).records : []))
            rig.pace()
            var random = SystemRandomNumberGenerator()
            var mark = rig.simulator.observation.totalConnections
            var worker = try rig.startProcess()
            for _ in 0..<scale.repeats {
                // Killed while it works: once it has pushed on connections of its own since it started, a
                // random moment later (a kill before it joined the group would show nothing; results
                // can still be the previous worker's, landing late).
                try await rig.waitUntil(60, "pushes from the restarted worker") {
                    await rig.pushes(onConnectionsAfter: mark) >= 30
                }
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...1_500, using: &random)))
                await rig.sigkill(worker)
                mark = rig.simulator.observation.totalConnections
                worker = try rig.startProcess()
            }
            rig.faultCleared()
        }
    }

    static let process: [Scenario] = [
        sigkillAtRandomPoints(lanes: false),
        sigkillAtRandomPoints(lanes: true),
        burstKill(faults: false),
        burstKill(faults: true),
        Scenario(
            "SIGTERM during a retry storm", .process,
            shows: """
                SIGTERM while 80% of requests get 503: the worker stops taking events, gives what it \
                cannot finish back uncommitted, and exits 0 inside its 10 s grace period; the next \
                worker finishes them.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events).records)
            rig.simulator.faults.setRate(.serviceUnavailable, 0.8)
            rig.pace()
            let worker = try rig.startProcess()
            try await rig.waitForResults(scale.events / 20)
            let signalled = ContinuousClock.now
            worker.signal(SIGTERM)
            try await rig.waitUntil(30, "the worker to exit") { !worker.isRunning }
            let took = ContinuousClock.now - signalled
            let status = worker.waitUntilExit()
            guard status == 0 else { throw ScenarioFailure("SIGTERM: exit \(status) (128 + N: killed by signal N)") }
            guard took < .seconds(10) else { throw ScenarioFailure("SIGTERM took \(took), past the 10 s grace period") }
            rig.simulator.faults.setRate(.serviceUnavailable, 0)
            _ = try rig.startProcess()
            rig.faultCleared()
        },
        Scenario(
            "rolling deploy (maxSurge 1)", .process, partitions: 8,
            shows: """
                A worker (20 events in flight) works through a backlog of 10,000 events (2,000 quick, 4 in \
                flight) while APNs answers after 20-200 ms; a new `apns-worker run` joins the group and, once \
                it pushes, the old one gets SIGTERM and exits, three times over (twice quick), as a \
                Deployment's rolling update does. A graceful hand-over: no event needs to be pushed twice.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.backlog).records)
            rig.pace(.uniform(.milliseconds(20), .milliseconds(200)))
            // 20 events in flight (4 quick), about 180 events/s a worker (36 quick): the backlog
            // outlasts the hand-overs, a minute of work either way.
            let inFlight = max(4, scale.backlog / 500)
            var old = try rig.startProcess(maxInFlight: inFlight)
            try await rig.waitForResults(scale.backlog / 20)
            for generation in 1...scale.generations {
                let mark = rig.simulator.observation.totalConnections
                let new = try rig.startProcess(maxInFlight: inFlight)
                // Its partitions assigned: it pushes on connections of its own (unless nothing is left).
                try await rig.waitUntil(90, "worker \(generation + 1) to push") {
                    await rig.pushes(onConnectionsAfter: mark) > 0 || rig.resultCount >= scale.backlog
                }
                old.signal(SIGTERM)
                try await rig.waitUntil(30, "worker \(generation) to exit") { !old.isRunning }
                let status = old.waitUntilExit()
                guard status == 0 else { throw ScenarioFailure("worker \(generation): SIGTERM, exit \(status)") }
                old = new
            }
            if rig.resultCount >= scale.backlog {
                throw ScenarioFailure("the backlog was done before the last hand-over: make it longer")
            }
            rig.faultCleared()
        },
        Scenario(
            "worker stalled (SIGSTOP) past its session", .process,
            shows: """
                One of two workers is frozen for 15 s (session 6 s): the group evicts it and the other \
                takes its partitions; thawed, it finds itself fenced, rejoins, and what it held is \
                processed once more at worst.
                """
        ) { rig, scale in
            try await rig.produce(rig.mixedBatch(scale.events * 2).records)
            rig.pace()
            let frozen = try rig.startProcess(maxInFlight: 20)
            let other = try rig.startWorker(maxInFlight: 20)
            try await rig.waitUntil(60, "both workers busy") {
                other.assembly.pipeline.inFlight > 0 && rig.resultCount > scale.events / 10
            }
            kill(frozen.processIdentifier, SIGSTOP)
            try await Task.sleep(for: .seconds(15))
            kill(frozen.processIdentifier, SIGCONT)
            rig.faultCleared()
        },
    ]

    /// Two apps on two credentials; every push of one gets TooManyRequests.
    static let appStorm = Scenario(
        "one app in a 429 storm, another beside it", .apns,
        shows: """
            Two apps on two credentials, 40 events in flight: every push of one app (a quarter of the \
            events, first in the input) gets TooManyRequests, 20 times in a row, so each of its events \
            backs off and fails after its attempts, with a dead letter. That app holds only its share \
            of the bound (`delivery.maxInFlightPerCredential`, 20); its other events wait parked. The \
            other app's events all have their results before a quarter of the stormed app's do \
            (without shares its events filled the bound, and the other app's waited for them: 479 of \
            500 had ended first). None is lost.
            """
    ) { rig, scale in
        let stormTopic = "com.example.storm"
        let storm = scale.events / 4
        let healthy = scale.events
        func event(_ series: UInt16, _ n: Int, topic: String, script: Bool) -> KafkaProducerMessage {
            let token = Samples.deviceToken(Int(series) << 24 + n)
            rig.simulator.devices.register(token)
            if script {
                rig.simulator.faults.script(deviceToken: token, Array(repeating: .tooManyRequests, count: 20) + [nil])
            }
            return Samples.alert(id: Samples.eventID(series, n), deviceToken: token, topic: topic)
        }
        // Each stormed event ahead of four others: without shares they fill the bound first.
        var records: [KafkaProducerMessage] = []
        for n in 0..<healthy {
            if n % 4 == 0, n / 4 < storm { records.append(event(3, n / 4, topic: stormTopic, script: true)) }
            records.append(event(4, n, topic: EmbeddedStack.bundleID, script: false))
        }
        try await rig.produce(records)
        rig.pace()
        let started = ContinuousClock.now
        _ = try rig.startWorker(maxInFlight: 40) { configuration in
            var second = configuration.apns.credentials[0]
            second.name = "storm"
            second.topics = [stormTopic]
            configuration.apns.credentials.append(second)
            configuration.delivery.maxParked = storm
        }
        rig.faultCleared()
        // Fairness without a clock: the order in which the two apps' results arrive.
        func done() -> (healthy: Int, storm: Int) {
            let outcomes = rig.results.snapshot.seen.values.map(\.outcome)
            return (outcomes.filter { $0 == .delivered }.count, outcomes.filter { $0 == .failed }.count)
        }
        try await rig.waitUntil(300, "the other app's \(healthy) results (have \(done().healthy))") {
            done().healthy >= healthy
        }
        let stormDone = done().storm
        if stormDone >= storm / 4 {
            throw ScenarioFailure(
                "the other app waited for the stormed one: \(stormDone) of its \(storm) events had ended when the other's \(healthy) had"
            )
        }
        rig.logger.notice(
            "the other app done",
            metadata: [
                "stormed app's events ended": "\(stormDone) of \(storm)", "after": "\(ContinuousClock.now - started)",
            ])
    }
}

extension Rig {
    func requireTansu() throws -> TansuBroker {
        guard let tansu else { throw ScenarioFailure("needs Tansu") }
        return tansu
    }

    func requireMock() throws -> KafkaMockCluster {
        guard let mock else { throw ScenarioFailure("needs the mock cluster") }
        return mock
    }

    /// Takes Kafka away (Tansu: resets and refuses every connection at its proxy; the mock cluster:
    /// its broker down) or brings it back.
    func setKafkaReachable(_ reachable: Bool) async throws {
        if let tansu {
            await tansu.proxy.setUnreachable(!reachable)
        } else if let mock {
            for broker in 1...Int32(mock.brokerCount) { try mock.setBroker(broker, up: reachable) }
        }
    }
}
