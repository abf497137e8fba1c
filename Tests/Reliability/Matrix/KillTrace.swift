import APNsSimulator
import Foundation
import Kafka
import Logging
import NIOConcurrencyHelpers
import Worker

/// What tells apart the pushes a row with SIGKILLs made again: for every acceptance of an `apns-id`
/// beyond its first, the acceptance before it, whether that one was on a killed process's
/// connection, and how long before the kill APNs answered it. The floor is the pushes not answered
/// at a kill; above it, a push answered within the commit window (the result's acknowledgement and
/// the next commit, about `commitInterval` plus two round trips) before the kill is the
/// at-least-once cost of a crash; one answered earlier, or whose offset the group's commit already
/// covered, would be a hand-over that lost progress.
///
/// With APNs at a fixed latency the answer's moment is the acceptance's plus that latency. With a
/// latency range (the burst rows) it is not known, and the result stands for it: a push whose result
/// the killed worker produced (the record's timestamp) before the kill was answered by then, and
/// is timed by that result; one without a result before the kill was not answered when accepted
/// less than the shortest latency before it (`unanswered`), and otherwise may or may not have been
/// (`noResult`: the floor tells how many were not).
final class KillTrace: Sendable {
    /// Answers within this long before a kill may not have reached the worker yet.
    static let inTransit = 0.005
    /// The commit window above: `commitInterval` (50 ms) plus the result's and the commit's trips.
    static let commitWindow = 0.065

    struct Kill: Sendable {
        /// Seconds since 1970, as the simulator's records say.
        var at: Double
        /// The killed process's connections (open before the kill, closed 2 s after it).
        var connections: [ConnectionSnapshot]
        /// The group's committed offsets read 2 s after the kill (nothing commits for them then).
        var committed: [KafkaTopicPartition: KafkaTopicPartitionOffset]
    }

    /// Acceptances beyond the first, by what the acceptance before each was.
    struct Attribution: Sendable, Equatable, CustomStringConvertible {
        /// Not answered at the kill: the floor.
        var unanswered = 0
        /// Of `unanswered`, accepted after the kill: sent by the killed worker and read by APNs once
        /// it was dead (the floor, read just before the kill, does not count these).
        var acceptedAfterKill = 0
        /// Answered less than `inTransit` before the kill.
        var inTransit = 0
        /// Answered within `commitWindow` of the kill.
        var commitWindow = 0
        /// Answered earlier than that, its offset not covered by the commit read after the kill.
        var earlier = 0
        /// Answered before the kill, and the commit read after it covers its offset.
        var covered = 0
        /// Not on a killed process's connection (the client's own retries, a live hand-over).
        var notAfterKill = 0
        /// A latency range only: no result produced before the kill, accepted long enough before it
        /// that APNs may have answered (answered and not yet published, or not answered).
        var noResult = 0
        /// Of `earlier`, why the stored progress did not cover the offset (`Uncovered`).
        var uncovered: [Uncovered: Int] = [:]

        var description: String {
            var text =
                "\(unanswered) unanswered at a kill (\(acceptedAfterKill) accepted after it), "
                + "\(inTransit) answered <5 ms before it, "
                + "\(commitWindow) answered 5-65 ms before it (the commit window), \(earlier) answered earlier, "
                + "\(covered) covered by the group's commit, \(notAfterKill) not after a kill"
            if noResult > 0 { text += ", \(noResult) without a result before the kill (answered or not)" }
            if !uncovered.isEmpty {
                let reasons = uncovered.sorted { $0.key.rawValue < $1.key.rawValue }.map {
                    "\($0.value) \($0.key.rawValue)"
                }
                text += "; the earlier ones: \(reasons.joined(separator: ", "))"
            }
            return text
        }
    }

    /// Why an event answered before the commit window was not covered by what the next owner read:
    /// the committed offset and its done records (in its metadata, or the newest progress record
    /// written before the kill, used only if written for that offset).
    enum Uncovered: String, Sendable, Hashable {
        /// The committed metadata's done records (a broker that keeps them) lack the offset.
        case metadataLacksIt = "not in the committed metadata"
        /// No progress record of the partition before the kill.
        case noProgress = "no progress record"
        /// Every progress record was written for an offset below the committed one: a commit landed
        /// and its progress record did not (the reader passes over them).
        case progressBehindCommit = "progress record behind the committed offset"
        /// The progress record for the committed offset lacks the offset.
        case progressLacksIt = "not in the progress record for the committed offset"
        /// The newest progress record not below the committed offset was written for one above it (a
        /// commit the broker refused, or that had not landed).
        case progressAheadOfCommit = "progress record ahead of the committed offset"
        /// No committed offset for the partition, or a result naming no partition.
        case nothingCommitted = "nothing committed"
    }

    private let kills = NIOLockedValueBox<[Task<Kill, Never>]>([])
    /// The group's partitions to read commits of.
    private let partitions: [KafkaTopicPartition]
    private let group: String
    private let bootstrapServers: String
    private let logger: Logger

    init(partitions: [KafkaTopicPartition], group: String, bootstrapServers: String, logger: Logger) {
        self.partitions = partitions
        self.group = group
        self.bootstrapServers = bootstrapServers
        var quiet = logger
        quiet.logLevel = .error
        self.logger = quiet
    }

    var isEmpty: Bool { kills.withLockedValue { $0.isEmpty } }

    /// One record of the progress topic (a broker that drops commit metadata): the done records above
    /// `written` of one input partition, from `at` (its timestamp, seconds since 1970) on.
    struct Progress: Sendable {
        var at: Double
        var written: Int64
        var done: OffsetRanges
    }

    /// Every record of `topic` (one partition), by the input partition its key names.
    private func progress(in topic: String) async -> [KafkaTopicPartition: [Progress]] {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: bootstrapServers, groupID: group + "-trace")
        configuration.sessionTimeout = .seconds(10)
        guard let reader = try? KafkaConsumer(configuration: configuration, logger: logger) else { return [:] }
        let partition = KafkaTopicPartition(topic: topic, partition: 0)
        var found: [KafkaTopicPartition: [Progress]] = [:]
        if let marks = try? await reader.watermarks(of: partition), marks.high > marks.low,
            (try? reader.assign([KafkaTopicPartitionOffset(partition, offset: marks.low)])) != nil
        {
            let stop = Task {
                try? await Task.sleep(for: .seconds(20))
                await reader.close()
            }
            do {
                for try await record in reader.messages {
                    let key = String(decoding: record.key ?? [], as: UTF8.self).split(separator: "\n")
                    let text = String(decoding: record.value ?? [], as: UTF8.self)
                    if key.count == 3, key[0] == group, let number = Int32(key[2]),
                        let written = CommitMetadata.writtenFor(text),
                        let metadata = try? CommitMetadata.decode(text, committed: written)
                    {
                        let at = Double(record.timestampMilliseconds ?? 0) / 1000
                        found[KafkaTopicPartition(topic: String(key[1]), partition: number), default: []].append(
                            Progress(at: at, written: written, done: metadata.done))
                    }
                    // Tansu's ListOffsets answers the start of the last batch: the fetch's end counts.
                    let end = max(marks.high, reader.fetchedHighWatermark(of: partition) ?? 0)
                    if record.offset + 1 >= end { break }
                }
            } catch {}
            stop.cancel()
        }
        await reader.close()
        return found
    }

    /// A process was SIGKILLed at `at` with `before` the simulator's connections just before.
    func killed(at: Double, before: [ConnectionSnapshot], simulator: Simulator) {
        let (partitions, group, servers, logger) = (self.partitions, self.group, bootstrapServers, self.logger)
        let task = Task { () -> Kill in
            try? await Task.sleep(for: .seconds(2))
            let open = Set(await simulator.connections().map(\.id))
            var committed: [KafkaTopicPartition: KafkaTopicPartitionOffset] = [:]
            var configuration = KafkaConsumerConfiguration(bootstrapServers: servers, groupID: group)
            configuration.sessionTimeout = .seconds(10)
            // Not subscribed: it only fetches the group's offsets, and never joins.
            if let reader = try? KafkaConsumer(configuration: configuration, logger: logger) {
                committed = (try? await reader.committed(partitions)) ?? [:]
                await reader.close()
            }
            return Kill(at: at, connections: before.filter { !open.contains($0.id) }, committed: committed)
        }
        kills.withLockedValue { $0.append(task) }
    }

    /// Attributes every acceptance beyond the first; `latency`: how long after accepting a push the
    /// simulator answers it (one value, or the bounds of a uniform range). `results`: each result's
    /// arrival, its producer's timestamp and its input record (`topic/partition/offset`) by
    /// `apns-id`. Writes the trace as JSON lines to `path` when given.
    func attribute(
        records: [NotificationRecord],
        results: [String: [(at: Double, produced: Double, key: String)]], latency: ClosedRange<Double>,
        progressTopic: String, writingTo path: String?
    ) async -> Attribution {
        let progress = await progress(in: progressTopic)
        var kills: [Kill] = []
        for task in self.kills.withLockedValue({ $0 }) { kills.append(await task.value) }
        var killOf: [Int: Int] = [:]
        for (index, kill) in kills.enumerated() {
            for connection in kill.connections { killOf[connection.id] = index }
        }
        var byID: [String: [NotificationRecord]] = [:]
        for record in records { byID[record.apnsID.lowercased(), default: []].append(record) }
        var attribution = Attribution()
        var lines = kills.map { Self.line($0, progress) }
        for (partition, records) in progress {
            for record in records {
                let done = record.done.ranges.map { "[\($0.lowerBound),\($0.upperBound)]" }
                lines.append(
                    "{\"progress\":\"\(partition.topic)/\(partition.partition)\",\"at\":\(record.at),"
                        + "\"written\":\(record.written),\"done\":[\(done.joined(separator: ","))]}")
            }
        }
        for (id, pushes) in byID where pushes.count > 1 {
            let pushes = pushes.sorted { $0.receivedAt < $1.receivedAt }
            let key = results[id]?.first?.key
            for previous in pushes.dropLast() {
                guard let index = killOf[previous.connectionID] else {
                    attribution.notAfterKill += 1
                    continue
                }
                let kill = kills[index]
                let beforeKill: Double
                if latency.lowerBound == latency.upperBound {
                    beforeKill = kill.at - (previous.receivedAt + latency.lowerBound)
                } else if let produced = results[id]?.map(\.produced).filter({ $0 <= kill.at }).min() {
                    beforeKill = kill.at - max(produced, previous.receivedAt + latency.lowerBound)
                } else if previous.receivedAt + latency.lowerBound > kill.at {
                    beforeKill = -1
                } else {
                    attribution.noResult += 1
                    continue
                }
                if beforeKill < 0 {
                    attribution.unanswered += 1
                    if previous.receivedAt > kill.at { attribution.acceptedAfterKill += 1 }
                } else if beforeKill < Self.inTransit {
                    attribution.inTransit += 1
                } else if let key, Self.uncovered(kill, progress, key) == nil {
                    attribution.covered += 1
                } else if beforeKill < Self.commitWindow {
                    attribution.commitWindow += 1
                } else {
                    attribution.earlier += 1
                    attribution.uncovered[
                        key.flatMap { Self.uncovered(kill, progress, $0) } ?? .nothingCommitted, default: 0] += 1
                }
            }
            let accepted = pushes.map { "{\"connection\":\($0.connectionID),\"at\":\($0.receivedAt)}" }
            let written = (results[id] ?? []).map {
                "{\"at\":\($0.at),\"produced\":\($0.produced),\"record\":\"\($0.key)\"}"
            }
            lines.append(
                "{\"apnsId\":\"\(id)\",\"accepted\":[\(accepted.joined(separator: ","))],\"results\":[\(written.joined(separator: ","))]}"
            )
        }
        if let path {
            try? (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        }
        return attribution
    }

    /// `nil` where what the next owner reads after `kill` covers `topic/partition/offset`: the
    /// committed offset, the done records in its metadata, or the progress record the worker would
    /// use (the newest written before the kill for the committed offset or above, if written for that
    /// offset; `ProgressTopic`); otherwise why not.
    private static func uncovered(_ kill: Kill, _ progress: [KafkaTopicPartition: [Progress]], _ key: String)
        -> Uncovered?
    {
        let parts = key.split(separator: "/")
        guard parts.count == 3, let number = Int32(parts[1]), let offset = Int64(parts[2]) else {
            return .nothingCommitted
        }
        let partition = KafkaTopicPartition(topic: String(parts[0]), partition: number)
        guard let stored = kill.committed[partition], stored.offset >= 0 else { return .nothingCommitted }
        if offset < stored.offset { return nil }
        if let text = stored.metadata, !text.isEmpty,
            let metadata = try? CommitMetadata.decode(text, committed: stored.offset)
        {
            return metadata.done.contains(offset) ? nil : .metadataLacksIt
        }
        let before = progress[partition]?.filter { $0.at <= kill.at } ?? []
        if before.isEmpty { return .noProgress }
        // As the next owner reads: back from the newest, passing over records written for a lower offset.
        guard let decides = before.last(where: { $0.written >= stored.offset }) else { return .progressBehindCommit }
        if decides.written > stored.offset { return .progressAheadOfCommit }
        return decides.done.contains(offset) ? nil : .progressLacksIt
    }

    /// The kill, its connections, and per partition the committed offset with its done records and
    /// the progress record written before the kill that the next owner would read (`written` offset,
    /// `at`; the newest, where none is written for the committed offset or above).
    private static func line(_ kill: Kill, _ progress: [KafkaTopicPartition: [Progress]]) -> String {
        let connections = kill.connections.map { "{\"id\":\($0.id),\"awaiting\":\($0.acceptancesAwaitingAnswer)}" }
        let committed = kill.committed.values.map { stored in
            let done =
                stored.metadata.flatMap { try? CommitMetadata.decode($0, committed: stored.offset) }?.done.ranges
                .map { "[\($0.lowerBound),\($0.upperBound)]" } ?? []
            var newest = ""
            if let record = progress[stored.topicPartition]?.last(where: {
                $0.at <= kill.at && $0.written >= stored.offset
            }) ?? progress[stored.topicPartition]?.last(where: { $0.at <= kill.at }) {
                newest =
                    ",\"progress\":{\"written\":\(record.written),\"at\":\(record.at),\"done\":\(record.done.count)}"
            }
            return "\"\(stored.topicPartition.topic)/\(stored.topicPartition.partition)\":"
                + "{\"offset\":\(stored.offset),\"done\":[\(done.joined(separator: ","))]\(newest)}"
        }
        return "{\"kill\":\(kill.at),\"connections\":[\(connections.joined(separator: ","))],"
            + "\"committed\":{\(committed.joined(separator: ","))}}"
    }
}
