import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import Worker

/// Reads a topic from its beginning for the whole scenario and remembers, per input record (its
/// partition/offset), when the first record about it arrived and how many did.
final class TopicWatcher: Sendable {
    enum Kind: Sendable {
        /// The input topic: a record is about itself.
        case input
        /// Result events: about the input record their `source` names.
        case results
        /// Dead letters: about the input record their source headers name.
        case deadLetters
    }

    struct Seen: Sendable {
        var first: ContinuousClock.Instant
        var count: Int
        /// Later records about it with the same bytes as the first: published twice, processed once.
        var republished = 0
        var firstValue: Int
        /// Results only: the outcome of the first result, and whether the worker owes a dead letter.
        var outcome: ResultOutcome?
        var needsDeadLetter = false
        /// Dead letters only: sent in the reduced form (the full record could not be published).
        var degraded = false
    }

    struct State: Sendable {
        var seen: [String: Seen] = [:]
        var total = 0
        var next: [KafkaTopicPartition: Int64] = [:]
        /// Every record read, by its own position: a consumer that loses its position reads some
        /// again, and a record read twice is not a duplicate the worker made.
        var positions: Set<KafkaPosition> = []
        /// Results only: each result's arrival (seconds since 1970), the record's own timestamp (when
        /// the worker produced it; the arrival where the record has none) and input record, by its `apnsId`.
        var byAPNsID: [String: [(at: Double, produced: Double, key: String)]] = [:]
    }

    struct KafkaPosition: Hashable, Sendable {
        var partition: Int32
        var offset: Int64
    }

    let topic: String
    let kind: Kind
    private let consumer: KafkaConsumer
    private let partitions: [KafkaTopicPartition]
    private let state = NIOLockedValueBox(State())
    private let reader: Task<Void, any Error>

    init(topic: String, kind: Kind, bootstrapServers: String, logger: Logger) async throws {
        self.topic = topic
        self.kind = kind
        var configuration = KafkaConsumerConfiguration(
            bootstrapServers: bootstrapServers, groupID: "reliability-watcher-\(UUID().uuidString.prefix(8))")
        configuration.sessionTimeout = .seconds(10)
        // Should a fetch position ever be lost, read again from the start (duplicates by position
        // are ignored), never jump to the end.
        configuration.properties["auto.offset.reset"] = "earliest"
        let consumer = try KafkaConsumer(configuration: configuration, logger: logger)
        self.consumer = consumer
        let partitions = try await consumer.partitions(of: topic).map {
            KafkaTopicPartition(topic: topic, partition: $0)
        }
        self.partitions = partitions
        try consumer.assign(partitions.map { KafkaTopicPartitionOffset($0, offset: KafkaOffset.beginning) })
        let state = self.state
        reader = Task {
            for try await record in consumer.messages {
                let about = Self.about(record, kind: kind)
                let now = ContinuousClock.now
                state.withLockedValue { state in
                    state.next[record.topicPartition] = max(state.next[record.topicPartition] ?? 0, record.offset + 1)
                    guard
                        state.positions.insert(KafkaPosition(partition: record.partition, offset: record.offset))
                            .inserted
                    else { return }
                    state.total += 1
                    guard let key = about.key else { return }
                    if let apnsID = about.apnsID {
                        let at = Date().timeIntervalSince1970
                        let produced = record.timestampMilliseconds.map { Double($0) / 1000 } ?? at
                        state.byAPNsID[apnsID, default: []].append((at, produced, key))
                    }
                    let value = (record.value ?? []).hashValue
                    if var seen = state.seen[key] {
                        seen.count += 1
                        if value == seen.firstValue { seen.republished += 1 }
                        state.seen[key] = seen
                    } else {
                        state.seen[key] = Seen(
                            first: now, count: 1, firstValue: value, outcome: about.outcome,
                            needsDeadLetter: about.needsDeadLetter, degraded: about.degraded)
                    }
                }
            }
        }
    }

    var snapshot: State { state.withLockedValue { $0 } }

    /// True once every partition has been read up to the end its last fetch reported.
    var caughtUp: Bool {
        let next = state.withLockedValue { $0.next }
        return partitions.allSatisfy { partition in
            guard let high = consumer.fetchedHighWatermark(of: partition) else { return false }
            return (next[partition] ?? 0) >= high
        }
    }

    func close() async {
        reader.cancel()
        _ = await reader.result
        await consumer.close()
    }

    private struct About {
        var key: String?
        var outcome: ResultOutcome?
        var needsDeadLetter = false
        var degraded = false
        var apnsID: String?
    }

    private static func about(_ record: KafkaConsumerMessage, kind: Kind) -> About {
        switch kind {
        case .input:
            return About(key: "\(record.topic)/\(record.partition)/\(record.offset)")
        case .deadLetters:
            guard let topic = record.headers.lastString(DeadLetterHeader.sourceTopic),
                let partition = record.headers.lastString(DeadLetterHeader.sourcePartition),
                let offset = record.headers.lastString(DeadLetterHeader.sourceOffset)
            else { return About() }
            return About(
                key: "\(topic)/\(partition)/\(offset)",
                degraded: record.headers.lastString(DeadLetterHeader.degraded) != nil)
        case .results:
            guard let object = try? JSONSerialization.jsonObject(with: Data(record.value ?? [])) as? [String: Any],
                let source = object["source"] as? [String: Any], let topic = source["topic"] as? String,
                let partition = source["partition"] as? Int, let offset = source["offset"] as? Int
            else { return About() }
            let outcome = ResultOutcome(rawValue: object["outcome"] as? String ?? "")
            // The outcomes that come with a dead letter (docs/events.md): failed, invalid, and
            // rejected for want of a credential (the only rejection without an APNs status).
            let needsDeadLetter =
                outcome == .failed || outcome == .invalid || (outcome == .rejected && !(object["status"] is Int))
            var about = About(
                key: "\(topic)/\(partition)/\(offset)", outcome: outcome, needsDeadLetter: needsDeadLetter)
            about.apnsID = (object["apnsId"] as? String)?.lowercased()
            return about
        }
    }
}
