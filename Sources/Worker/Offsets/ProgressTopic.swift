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
/// itself, passing over records written for a lower one (an earlier owner's, landed late) and
/// stopping at one written for a higher one (a group moved back by an operator). Nothing else reads the topic: compact it, or give it a retention longer than an
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
        // Assigned, never subscribed: no group protocol is spoken, and the classic one's settings are the
        // ones librdkafka accepts whatever the worker's group speaks.
        reader.groupProtocol = .classic
        reader.properties["group.instance.id"] = nil
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

    /// What the newest progress record written for each partition's committed offset says is done
    /// above it. Partitions without a usable record are absent.
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
            for (partition, text) in try await newest(keys, committed: committed, in: progressPartition) {
                guard let offset = committed[partition] else { continue }
                guard let written = CommitMetadata.writtenFor(text) else {
                    logger.warning("\(partition): its progress record in \(topic) is unreadable; ignored")
                    continue
                }
                // Written for a later offset than the one committed: the group was moved back; what it
                // says may not describe what this owner will read.
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

    /// For each key of one progress partition, its newest record that is not stale: one written for
    /// an offset below the partition's committed offset is an earlier owner's, landed late (a
    /// revocation that could not commit writes its done records after it let go) or simply older,
    /// and is passed over; the first other record met reading backwards decides (written for the
    /// committed offset: used; for a later one, or unreadable: nothing is known). Windows are read
    /// backwards from the end, each four times the last, until every key is decided, the start is
    /// reached or `maxScanned`. The end is the one the fetch reports: Tansu's ListOffsets answers one
    /// past the first offset of the last batch, and one commit's records for several partitions share
    /// a batch.
    private func newest(
        _ keys: [[UInt8]: KafkaTopicPartition], committed: [KafkaTopicPartition: Int64], in progressPartition: Int32
    ) async throws -> [KafkaTopicPartition: String] {
        let partition = KafkaTopicPartition(topic: topic, partition: progressPartition)
        let marks = try await withReader { try await $0.watermarks(of: partition) }
        var decided: [KafkaTopicPartition: String] = [:]
        var end = marks.high
        var window: Int64 = 1_000
        var scanned: Int64 = 0
        var top = true
        while end > marks.low, decided.count < keys.count, scanned < Int64(maxScanned) {
            let start = max(marks.low, end - window)
            let listedEnd = end
            let (inWindow, windowEnd) = try await withReader { reader in
                var latest: [KafkaTopicPartition: String] = [:]
                var windowEnd = listedEnd
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
                var first = true
                for try await record in reader.messages {
                    lastRecord.withLock { $0 = .now }
                    if top, first, let fetched = reader.fetchedHighWatermark(of: partition), fetched > windowEnd {
                        windowEnd = fetched
                    }
                    first = false
                    if record.offset >= windowEnd { break }
                    if let key = record.key, let owner = keys[key] {
                        let text = String(decoding: record.value ?? [], as: UTF8.self)
                        let stale = CommitMetadata.writtenFor(text).map { $0 < committed[owner] ?? 0 } ?? false
                        if !stale { latest[owner] = text }  // later ones win
                    }
                    if record.offset + 1 >= windowEnd { break }
                }
                return (latest, windowEnd)
            }
            for (owner, text) in inWindow where decided[owner] == nil { decided[owner] = text }
            scanned += windowEnd - start
            end = start
            window *= 4
            top = false
        }
        return decided
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
