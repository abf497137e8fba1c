import Threading
import APNsSimulator
import Foundation
import Kafka
import Logging
import Worker

/// `apns-worker demo`: the embedded stack, a mixed batch of events, the real pipeline over them until
/// every event has its result, and a summary of what came out.
package enum Demo {
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// What the results topic and the dead-letter topic hold after the run.
    package struct Summary: Sendable {
        package var events = 0
        package var outcomes: [ResultOutcome: Int] = [:]
        package var expected: [ResultOutcome: Int] = [:]
        package var attempts: [ResultOutcome: Int] = [:]
        package var latenciesMs: [Double] = []
        package var deadLetters: [String: Int] = [:]
        /// Events whose outcome is not the one the batch was built for.
        package var mismatches: [String] = []
        package var retried = 0
        package var elapsed: Duration = .zero
        package var simulatorCounters: [String: Int] = [:]
        package var metricsPort: Int?
        package var bootstrapServers = ""
        package var simulatorAddress = ""
        /// The broadcast channel created at start (channel management), and each broadcast's result:
        /// event id, outcome, apns-request-id.
        package var broadcastChannel: String?
        package var broadcasts: [(id: String, outcome: ResultOutcome, requestID: String?)] = []
        /// Broadcasts the simulator accepted on the channel.
        package var broadcastsAccepted = 0

        package var isExpected: Bool { mismatches.isEmpty && outcomes == expected }
    }

    /// Live Activity updates broadcast to the demo's channel, besides the device events.
    package static let broadcastCount = 4

    package static func run(events count: Int = 200, logger: Logger) async throws -> Summary {
        let stack = try await EmbeddedStack.start(logger: logger)
        do {
            let summary = try await run(count, on: stack, logger: logger)
            await stack.shutdown()
            return summary
        } catch {
            await stack.shutdown()
            throw error
        }
    }

    private static func run(_ count: Int, on stack: EmbeddedStack, logger: Logger) async throws -> Summary {
        var quiet = logger
        // librdkafka reports each closed connection as an error; the demo's own checks say what matters.
        quiet.logLevel = .critical
        var batch = SampleBatch.mixed(count: count, topic: EmbeddedStack.inputTopic, simulator: stack.simulator)
        // A Live Activity over a broadcast channel: the channel is created as a provider would (a
        // channel-management request), and its updates go through Kafka like every other event.
        let channel = try await stack.createChannel()
        batch.addBroadcasts(channel: channel, count: broadcastCount, topic: EmbeddedStack.inputTopic)
        let total = batch.records.count
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: stack.cluster.bootstrapServers), logger: quiet)
        for record in batch.records { _ = try await producer.send(record) }
        await producer.close()

        let port = Locked<Int?>(nil)
        let assembly = try WorkerRuntime.assemble(
            try stack.configuration(), logger: quiet, onListening: { bound in port.withLock { $0 = bound } })
        let group = assembly.serviceGroup(handlingSignals: false)
        let clock = ContinuousClock()
        let started = clock.now
        let worker = Task { try await group.run() }

        var summary = Summary()
        summary.events = total
        summary.broadcastChannel = channel
        summary.expected = batch.expectedCounts
        summary.bootstrapServers = stack.cluster.bootstrapServers
        summary.simulatorAddress = "localhost:\(stack.simulator.port)"
        do {
            let results = try await readTopic(
                EmbeddedStack.resultsTopic, from: stack, until: total, timeout: .seconds(120), logger: quiet)
            summary.elapsed = clock.now - started
            for record in results {
                guard let object = try? JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any],
                    let outcomeText = object["outcome"] as? String, let outcome = ResultOutcome(rawValue: outcomeText)
                else {
                    throw Failure(
                        description: "a result event is not valid JSON: \(record.topicPartition)@\(record.offset)")
                }
                summary.outcomes[outcome, default: 0] += 1
                let attempts = (object["attempts"] as? Int) ?? 0
                summary.attempts[outcome, default: 0] += attempts
                if attempts > 1 { summary.retried += 1 }
                if let latency = object["latencyMs"] as? Double { summary.latenciesMs.append(latency) }
                if let id = object["eventId"] as? String, let expected = batch.expected[id], expected != outcome {
                    summary.mismatches.append("\(id): \(outcome.rawValue), expected \(expected.rawValue)")
                }
                if let id = object["eventId"] as? String, id.hasPrefix("broadcast-") {
                    summary.broadcasts.append((id, outcome, object["apnsRequestId"] as? String))
                }
            }
            let deadLetters = try await readTopic(
                EmbeddedStack.deadLetterTopic, from: stack, until: batch.expectedDeadLetters, timeout: .seconds(30),
                logger: quiet)
            for record in deadLetters {
                summary.deadLetters[record.headers.lastString(DeadLetterHeader.reason) ?? "?", default: 0] += 1
            }
        } catch {
            await group.triggerGracefulShutdown()
            _ = await worker.result
            throw error
        }
        await group.triggerGracefulShutdown()
        try await worker.value
        summary.metricsPort = port.withLock { $0 }
        summary.broadcasts.sort { $0.id < $1.id }
        summary.broadcastsAccepted = stack.simulator.observation.broadcasts.filter { $0.channelID == channel }.count
        summary.simulatorCounters = Dictionary(
            uniqueKeysWithValues: stack.simulator.observation.counters.map { ("\($0.key)", $0.value) })
        return summary
    }

    /// Reads a topic from its beginning until `count` records arrived, one per source record (a
    /// redelivered duplicate counts once).
    package static func readTopic(
        _ topic: String, from stack: EmbeddedStack, until count: Int, timeout: Duration, logger: Logger
    ) async throws -> [KafkaConsumerMessage] {
        guard count > 0 else { return [] }
        var configuration = KafkaConsumerConfiguration(
            bootstrapServers: stack.cluster.bootstrapServers, groupID: "apns-worker-demo-reader")
        configuration.sessionTimeout = .seconds(10)
        let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        let partitions = try await consumer.partitions(of: topic)
        try consumer.assign(
            partitions.map { KafkaTopicPartitionOffset(topic: topic, partition: $0, offset: KafkaOffset.beginning) })
        let collected = Locked<[String: KafkaConsumerMessage]>([:])
        let reader = Task {
            for try await record in consumer.messages {
                let done = collected.withLock { records in
                    records[Self.sourceKey(record)] = record
                    return records.count >= count
                }
                if done { return }
            }
        }
        let deadline = Task {
            try await Task.sleep(for: timeout)
            reader.cancel()
        }
        _ = await reader.result
        deadline.cancel()
        await consumer.close()
        let records = collected.withLock { Array($0.values) }
        guard records.count >= count else {
            throw Failure(description: "\(topic): \(records.count) of \(count) records after \(timeout)")
        }
        return records
    }

    /// Which input record a result or dead letter is about.
    private static func sourceKey(_ record: KafkaConsumerMessage) -> String {
        if let topic = record.headers.lastString(DeadLetterHeader.sourceTopic),
            let partition = record.headers.lastString(DeadLetterHeader.sourcePartition),
            let offset = record.headers.lastString(DeadLetterHeader.sourceOffset)
        {
            return "\(topic)/\(partition)/\(offset)"
        }
        if let object = try? JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any],
            let source = object["source"] as? [String: Any], let topic = source["topic"],
            let partition = source["partition"], let offset = source["offset"]
        {
            return "\(topic)/\(partition)/\(offset)"
        }
        return "\(record.partition)/\(record.offset)"
    }
}
