import Kafka
import Logging
import Threading

/// How far done records read back (a committed offset's metadata, a progress record) are trusted.
/// They are checked by their checksum and the offset they were written for, but a record written by
/// a principal with write access to the group or the progress topic, or an old one of a recreated
/// topic whose committed offset happens to match, could name offsets that were never finished, and
/// every later owner would skip those: no push, no result. Two things a true record cannot say:
///
/// - an offset at or past the partition's end when it is assigned (nothing can be done there yet);
/// - more records left not done between its committed offset and its highest done one than its
///   writer could have had unfinished: `maxInFlight` running plus `maxParked` parked, doubled so that
///   a writer whose bounds are up to twice this worker's (a configuration being rolled out) is still
///   trusted. Records, not offsets: under `read_committed` an aborted transaction leaves a stretch of
///   offsets with no record, compaction leaves many, and a true record's stretch left not done can
///   span thousands of offsets around one unfinished event. So the assignment counts the stretches,
///   not their offsets (each holds at least one record left unfinished: the writer's, or one an
///   earlier owner left that it had not reached), and reading counts the records: `PartitionOffsets`
///   counts those read inside the ranges and not done there, and past the bound drops what the ranges
///   name from there on (what they named below was skipped already: the limit of a check made while
///   reading). The ranges themselves may be long (an event waiting out `maxRetryDuration` holds the
///   committed offset while everything above it finishes): only what is missing inside them is
///   bounded.
///
/// What a member owes itself (`OwedProgress`) is checked the same way, merged with what was read back
/// (`StartingProgress`): a topic recreated since would make it name new records.
///
/// A record that says either is refused (counted, `apns_worker_done_records_refused_total`) and
/// treated as no record: every event from the committed offset on is run, pushes again but loses
/// nothing. A writer with bounds more than twice this worker's can have its true records refused the
/// same way.
package struct DoneRecordBounds: Sendable {
    /// Stretches, and records read, left not done inside a record's ranges, at most.
    let maxGaps: Int64

    init(maxInFlight: Int, maxParked: Int?) {
        maxGaps = 2 * (Int64(maxInFlight) + Int64(maxParked ?? maxInFlight))
    }

    package enum Refusal: String, Sendable, CaseIterable {
        case pastEnd = "past-end"
        case tooManyGaps = "too-many-gaps"
    }

    /// Why `known` cannot be true of a partition that ends at `end` (nil: not known), if it cannot.
    func refusal(of known: KnownProgress, end: Int64?) -> Refusal? {
        guard let top = known.done.ranges.last?.upperBound else { return nil }
        if let end, top > end { return .pastEnd }
        return Self.stretchesNotDone(in: known) > maxGaps ? .tooManyGaps : nil
    }

    /// The stretches of offsets left not done between the committed offset and the highest done one:
    /// one before each range that does not start where the last one (or the committed offset) ends.
    static func stretchesNotDone(in known: KnownProgress) -> Int64 {
        var stretches: Int64 = 0
        var next = known.committed
        for range in known.done.ranges where range.upperBound > next {
            if range.lowerBound > next { stretches += 1 }
            next = range.upperBound
        }
        return stretches
    }
}

/// Where partitions end, as far as a record can have been done there.
enum PartitionEnds {
    /// Learns each partition's end, handing each to `learned` as it comes: ListOffsets for every
    /// partition at once (up to 5 s, as long as `deadline` allows), and where a done record reaches
    /// past that answer, the end as a fetch reports it instead (Tansu's ListOffsets answers one past
    /// the first offset of the last batch), from one reader for all such partitions (up to 2 s). A
    /// partition whose end could not be learnt is never handed over. Returns when every partition
    /// is answered, or once its waits are over.
    static func learn(
        _ tops: [KafkaTopicPartition: Int64], consumer: KafkaConsumer, reader: KafkaConsumerConfiguration,
        until deadline: ContinuousClock.Instant, logger: Logger,
        learned: @Sendable (KafkaTopicPartition, Int64) -> Void
    ) async {
        let asking = min(.seconds(5), deadline - .now)
        guard !tops.isEmpty, asking > .zero else { return }
        var lagging: [KafkaTopicPartition: Int64] = [:]
        for await answer in consumer.ends(of: Array(tops.keys), timeout: asking) {
            guard case .success(let listed) = answer.end, let top = tops[answer.partition] else { continue }
            if top <= listed {
                learned(answer.partition, listed)
            } else {
                lagging[answer.partition] = listed
            }
        }
        guard !lagging.isEmpty else { return }
        let fetched = await fetchedEnds(
            from: lagging.mapValues { max($0 - 1, 0) }, reader: reader, until: min(deadline, .now + .seconds(2)),
            logger: logger)
        for (partition, listed) in lagging { learned(partition, max(fetched[partition] ?? listed, listed)) }
    }

    /// The high watermark the first fetch of each partition from its offset reports, on one reader,
    /// until `deadline`; a partition none came for is absent.
    private static func fetchedEnds(
        from offsets: [KafkaTopicPartition: Int64], reader: KafkaConsumerConfiguration,
        until deadline: ContinuousClock.Instant, logger: Logger
    ) async -> [KafkaTopicPartition: Int64] {
        var settings = reader
        settings.groupID += "-end-reader"  // never joins nor commits: assign only
        settings.stallBound = nil
        settings.groupProtocol = .classic  // assigned, never subscribed (as the progress reader)
        settings.properties["group.instance.id"] = nil
        guard let consumer = try? KafkaConsumer(configuration: settings, logger: logger) else { return [:] }
        defer { Task { await consumer.close() } }
        let start = offsets.map { KafkaTopicPartitionOffset($0.key, offset: $0.value) }
        guard (try? consumer.assign(start)) != nil else { return [:] }
        var ends: [KafkaTopicPartition: Int64] = [:]
        while ContinuousClock.now < deadline {
            for partition in offsets.keys where ends[partition] == nil {
                ends[partition] = consumer.fetchedHighWatermark(of: partition)
            }
            if ends.count == offsets.count { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return ends
    }
}
