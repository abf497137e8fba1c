import Threading
import Foundation
import Kafka
import Logging

/// The cursors of the reasons one replay run handles, read from and stored in their groups'
/// committed offsets and commit metadata, and the run's hold on them: two runs over the same
/// cursors never both replay a dead letter, because the second is refused.
///
/// The hold is a lease in each cursor's metadata (the run's id and an expiry), taken by writing it
/// and reading it back after `settle`: two runs that start together both write, both read back the
/// later write, and only its writer goes on (a run whose own read-then-write took longer than
/// `settle` gives up, so the other's read-back always comes after both writes). Every checkpoint
/// checks the hold is still this run's and renews it; the last one gives it up. A run that dies
/// holding it blocks others until it expires (`duration`).
///
/// On a broker that drops commit metadata (Tansu 0.6) nothing can be held or remembered beyond the
/// offsets: the run goes on, says so, and its cursors never pass a dead letter it left alone.
struct ReplayCursorStore: Sendable {
    typealias Cursors = [DeadLetterReason: [KafkaTopicPartition: ReplayCursor]]

    let holder: String
    let groups: [DeadLetterReason: KafkaConsumer]
    let partitions: [KafkaTopicPartition]
    /// Each partition's first stored offset: a cursor never stays below it.
    let lows: [KafkaTopicPartition: Int64]
    let duration: Duration
    let settle: Duration
    let logger: Logger
    /// The most commit metadata a cursor stores (Kafka's default `offset.metadata.max.bytes`).
    var maxMetadataBytes = 4096
    private let keepsMetadata = Locked(true)

    init(
        holder: String, groups: [DeadLetterReason: KafkaConsumer], partitions: [KafkaTopicPartition],
        lows: [KafkaTopicPartition: Int64], duration: Duration, settle: Duration, logger: Logger
    ) {
        self.holder = holder
        self.groups = groups
        self.partitions = partitions
        self.lows = lows
        self.duration = duration
        self.settle = settle
        self.logger = logger
    }

    struct Held: Sendable {
        var cursors: Cursors
        /// Lines for the report: metadata that could not be used, a broker that keeps none.
        var notes: [String] = []
    }

    /// The cursors as earlier runs left them, without holding them (a dry run).
    func read() async throws -> Held {
        var held = Held(cursors: [:])
        for (reason, group) in groups {
            for (partition, stored) in try await group.committed(partitions) {
                guard let text = stored.metadata else { continue }
                do {
                    _ = try CommitMetadata.decode(text, committed: stored.offset)
                } catch {
                    let note =
                        "\(reason.rawValue) cursor of \(partition): its commit metadata is \(error); "
                        + "replaying from its offset \(stored.offset)"
                    logger.warning("\(note)")
                    held.notes.append(note)
                }
            }
            held.cursors[reason] = try await cursors(of: group).mapValues(\.cursor)
        }
        return held
    }

    /// Reads the cursors and takes the hold on them, or throws `ReplayError` when another run has it.
    func acquire() async throws -> Held {
        let began = ContinuousClock.now
        var held = try await read()
        for (reason, group) in groups {
            for (partition, lease) in try await cursors(of: group).compactMapValues(\.lease)
            where lease.holder != holder && lease.expiryDate > Date() {
                throw busy(reason, partition, lease)
            }
        }
        try await store(held.cursors, lease: true)
        var keeps = false
        do {
            let took = ContinuousClock.now - began
            guard took < settle else {
                throw DeadLetterReplayer.ReplayError(
                    description:
                        "Kafka took \(took) to read and store the cursors (more than \(settle)), too long to tell "
                        + "whether another replay run started at the same time; nothing was replayed: run it again")
            }
            try await Task.sleep(for: settle)
            for (reason, group) in groups {
                for (partition, read) in try await cursors(of: group) {
                    guard let lease = read.lease else { continue }
                    keeps = true
                    if lease.holder != holder { throw busy(reason, partition, lease) }
                }
            }
        } catch {
            // Refused: what this run holds of the cursors goes at once, not when it expires.
            await letGo()
            throw error
        }
        if !keeps {
            keepsMetadata.withLock { $0 = false }
            held.notes.append(
                "this broker keeps no commit metadata: a replay run started meanwhile would not be noticed, and what "
                    + "this run replays past a dead letter it leaves alone is replayed again by the next run")
        }
        return held
    }

    /// Stores the cursors and renews the hold, once sure it is still this run's.
    func renew(_ cursors: Cursors) async throws {
        try await checkStillHeld()
        try await store(cursors, lease: true)
    }

    /// Stores the cursors and gives the hold up, once sure it is still this run's.
    func release(_ cursors: Cursors) async throws {
        try await checkStillHeld()
        try await store(cursors, lease: false)
    }

    private func checkStillHeld() async throws {
        guard keepsMetadata.withLock({ $0 }) else { return }
        for (reason, group) in groups {
            for (partition, read) in try await self.cursors(of: group) where read.lease?.holder != holder {
                let other = read.lease.map { "replay run \($0.holder)" } ?? "something else"
                throw DeadLetterReplayer.ReplayError(
                    description:
                        "the \(reason.rawValue) cursor of \(partition) was taken over by \(other) (this run's hold "
                        + "lapsed); stopped")
            }
        }
    }

    /// Gives up whatever of the hold is still this run's: each such cursor is stored again as it is
    /// now, without the lease (never as this run last saw it: a run that gave up may have seen it
    /// before another run moved it). Best effort: otherwise the hold expires.
    private func letGo() async {
        for (reason, group) in groups {
            do {
                let offsets = try await cursors(of: group).compactMap { partition, read -> KafkaTopicPartitionOffset? in
                    guard read.lease?.holder == holder else { return nil }
                    let text = read.cursor.metadata(lease: nil).encoded(maxBytes: maxMetadataBytes).text
                    return KafkaTopicPartitionOffset(partition, offset: read.cursor.low, metadata: text)
                }
                try await group.commit(offsets)
            } catch {
                logger.warning(
                    "could not give up the hold on the \(reason.rawValue) cursors: \(error); it expires in \(duration)")
            }
        }
    }

    /// After a failure: gives up what of the hold is still this run's (best effort; otherwise it
    /// expires).
    func abandon() async {
        await letGo()
    }

    // MARK: -

    private func busy(
        _ reason: DeadLetterReason, _ partition: KafkaTopicPartition, _ lease: CommitMetadata.Lease
    ) -> DeadLetterReplayer.ReplayError {
        DeadLetterReplayer.ReplayError(
            description:
                "another replay run (\(lease.holder)) holds the \(reason.rawValue) cursor of \(partition) until "
                + "\(DeadLetterTime.format(lease.expiryDate)); nothing was replayed. Wait for it to end (a run that "
                + "died lets go at that time)")
    }

    private func store(_ cursors: Cursors, lease: Bool) async throws {
        let expires = Int64((Date().timeIntervalSince1970 + duration.seconds) * 1000)
        for (reason, group) in groups {
            guard let ofReason = cursors[reason] else { continue }
            var offsets: [KafkaTopicPartitionOffset] = []
            for (partition, cursor) in ofReason.sorted(by: { $0.key < $1.key }) {
                let metadata = cursor.metadata(
                    lease: lease ? CommitMetadata.Lease(holder: holder, expires: expires) : nil)
                let (text, omitted) = metadata.encoded(maxBytes: maxMetadataBytes)
                if omitted > 0 {
                    logger.warning(
                        "\(reason.rawValue) cursor of \(partition): \(omitted) replayed offsets do not fit in the commit metadata; the next run replays them again"
                    )
                }
                offsets.append(KafkaTopicPartitionOffset(partition, offset: cursor.low, metadata: text))
            }
            try await group.commit(offsets)
        }
    }

    /// Each partition's cursor (its group's committed offset and what its metadata says), and the
    /// lease in it.
    private func cursors(
        of group: KafkaConsumer
    ) async throws -> [KafkaTopicPartition: (cursor: ReplayCursor, lease: CommitMetadata.Lease?)] {
        let committed = try await group.committed(partitions)
        var result: [KafkaTopicPartition: (cursor: ReplayCursor, lease: CommitMetadata.Lease?)] = [:]
        for partition in partitions {
            let low = lows[partition] ?? 0
            guard let stored = committed[partition] else {
                result[partition] = (ReplayCursor(low: low), nil)
                continue
            }
            let metadata = stored.metadata.flatMap { try? CommitMetadata.decode($0, committed: stored.offset) }
            // Nothing is stored below the partition's first offset any more.
            result[partition] = (
                ReplayCursor(low: max(stored.offset, low), handled: metadata?.done ?? OffsetRanges()), metadata?.lease
            )
        }
        return result
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
