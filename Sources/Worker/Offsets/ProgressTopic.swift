import Threading
import Foundation
import Kafka
import Logging

/// Where the done records above each committed offset go when the broker drops commit metadata
/// (Tansu 0.6 stores the offset and throws its metadata away): a topic of the worker's own
/// (`delivery.progressTopic`), one record per commit and input partition whose done set is not
/// empty, keyed `<group>\n<topic>\n<partition>`, its value the same text the commit's metadata would
/// hold (`CommitMetadata`), in a partition of the progress topic chosen from the key (FNV-1a), so
/// that every record of one input partition lands in the same place.
///
/// A partition's next owner looks for the newest record of its key, reading the progress partition
/// backwards in growing windows from its end (the newest record of a busy partition is near the
/// end; a compacted topic keeps the rest small); it trusts only one written for the committed offset
/// itself (an older one may describe another incarnation of a recreated topic, or a group moved back
/// by an operator). Nothing else reads the topic: compact it, or give it a retention longer than an
/// event's longest retry.
final class ProgressTopic: Sendable {
    let topic: String
    let group: String
    private let readerConfiguration: KafkaConsumerConfiguration
    private let logger: Logger
    /// The progress topic's partition count, learned at the first write or read.
    private let partitionCount = Locked<Int32?>(nil)
    /// How many records a lookup reads at most before it gives up (and the committed offset alone counts).
    let maxScanned = 200_000

    init(topic: String, group: String, consumer: KafkaConsumerConfiguration, logger: Logger) {
        self.topic = topic
        self.group = group
        var reader = consumer
        reader.groupID = group + "-progress-reader"  // never joins nor commits: assign only
        reader.partitionAssignment = .range
        self.readerConfiguration = reader
        self.logger = logger
    }

    func key(_ partition: KafkaTopicPartition) -> [UInt8] {
        Array("\(group)\n\(partition.topic)\n\(partition.partition)".utf8)
    }

    /// The progress partition that holds `key`'s records.
    func place(_ key: [UInt8], among count: Int32) -> Int32 {
        var hash: UInt32 = 0x811C_9DC5
        for byte in key {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return Int32(hash % UInt32(max(count, 1)))
    }

    /// The records to write for these commits: the ones with done records above their offset.
    /// (A candidate's done records may include its offset: see `WorkerPipeline+StateMachine`'s
    /// `doneSinceLastStored`.)
    func records(_ candidates: [CommitCandidate], metadataBytes: Int) async throws -> [KafkaProducerMessage] {
        let writing = candidates.filter { !$0.done.isEmpty }
        guard !writing.isEmpty else { return [] }
        let count = try await partitions()
        return writing.map { candidate in
            let key = key(candidate.partition)
            let text = CommitMetadata(committed: candidate.offset, done: candidate.done).encoded(
                maxBytes: max(metadataBytes, 4096)
            ).text
            return KafkaProducerMessage(
                topic: topic, partition: place(key, among: count), key: key, value: Array(text.utf8))
        }
    }

    /// What the newest progress record of each partition says is done above its committed offset.
    /// Partitions without a usable record are absent.
    func read(committed: [KafkaTopicPartition: Int64]) async throws -> [KafkaTopicPartition: OffsetRanges] {
        guard !committed.isEmpty else { return [:] }
        let count = try await partitions()
        var wanted: [Int32: [[UInt8]: KafkaTopicPartition]] = [:]
        for partition in committed.keys {
            let key = key(partition)
            wanted[place(key, among: count), default: [:]][key] = partition
        }
        var found: [KafkaTopicPartition: OffsetRanges] = [:]
        for (progressPartition, keys) in wanted {
            for (partition, text) in try await newest(keys, in: progressPartition) {
                guard let offset = committed[partition] else { continue }
                guard let written = CommitMetadata.writtenFor(text) else {
                    logger.warning("\(partition): its progress record in \(topic) is unreadable; ignored")
                    continue
                }
                // Written for another offset than the one committed: the group was moved (or a commit
                // after it had nothing done above its offset, or the record of the last commit was not
                // written before a crash); what it says may not describe what this owner will read.
                guard written == offset else { continue }
                do {
                    let done = try CommitMetadata.decode(text, committed: written).done
                    if !done.isEmpty { found[partition] = done }
                } catch {
                    logger.warning("\(partition): its progress record in \(topic) is \(error); ignored")
                }
            }
        }
        return found
    }

    /// The newest value of each key in one progress partition: windows read backwards from its end,
    /// each four times the last, until every key is found, the start is reached or `maxScanned`.
    private func newest(
        _ keys: [[UInt8]: KafkaTopicPartition], in progressPartition: Int32
    ) async throws -> [KafkaTopicPartition: String] {
        let partition = KafkaTopicPartition(topic: topic, partition: progressPartition)
        let marks = try await withReader { try await $0.watermarks(of: partition) }
        var found: [KafkaTopicPartition: String] = [:]
        var end = marks.high
        var window: Int64 = 1_000
        var scanned: Int64 = 0
        while end > marks.low, found.count < keys.count, scanned < Int64(maxScanned) {
            let start = max(marks.low, end - window)
            let windowEnd = end
            let inWindow = try await withReader { reader in
                var latest: [KafkaTopicPartition: String] = [:]
                try reader.assign([KafkaTopicPartitionOffset(partition, offset: start)])
                // Offsets near the end may hold no record (transaction markers): the window also
                // ends once nothing has arrived for a while (the reader is closed under it).
                let lastRecord = Locked(ContinuousClock.now)
                let quiet = Task {
                    while true {
                        try await Task.sleep(for: .milliseconds(250))
                        if ContinuousClock.now - lastRecord.withLock({ $0 }) > .milliseconds(1_500) { break }
                    }
                    await reader.close()
                }
                defer { quiet.cancel() }
                for try await record in reader.messages {
                    lastRecord.withLock { $0 = .now }
                    if record.offset >= windowEnd { break }
                    if let key = record.key, let owner = keys[key] {
                        latest[owner] = String(decoding: record.value ?? [], as: UTF8.self)  // later ones win
                    }
                    if record.offset + 1 >= windowEnd { break }
                }
                return latest
            }
            for (owner, text) in inWindow where found[owner] == nil { found[owner] = text }
            scanned += end - start
            end = start
            window *= 4
        }
        return found
    }

    /// A reader for one lookup, closed afterwards.
    private func withReader<T: Sendable>(_ body: (KafkaConsumer) async throws -> T) async throws -> T {
        let reader = try KafkaConsumer(configuration: readerConfiguration, logger: logger)
        do {
            let result = try await body(reader)
            await reader.close()
            return result
        } catch {
            await reader.close()
            throw error
        }
    }

    private func partitions() async throws -> Int32 {
        if let count = partitionCount.withLock({ $0 }) { return count }
        let topic = self.topic
        let count = try await withReader { reader in
            guard try await reader.topicNames().contains(topic) else {
                throw KafkaError(code: .unknownTopic, message: "the progress topic '\(topic)' does not exist")
            }
            return Int32(try await reader.partitions(of: topic).count)
        }
        partitionCount.withLock { $0 = count }
        return count
    }
}
