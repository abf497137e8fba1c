/// Notices an assigned partition that stopped reading while records wait in it: fetching, not
/// paused, its position unmoved for `bound`, and the broker's end of the partition beyond that
/// position. librdkafka 2.0.2's mock cluster once left a partition this way after a leader change,
/// for good; the consumer then seeks the partition to its own position, which restarts its fetch
/// without skipping or repeating a record, and does so again every `bound` while it stays stalled.
///
/// Pure: the consumer feeds it what it sees (positions, the broker's answer) with the time and the
/// consumer's tenure (its count of assignment changes), and performs what it returns. A partition
/// with no position yet (nothing read since it was assigned) is not watched: its start is the
/// committed offset, which the watch does not know.
///
/// The broker's answer comes seconds after the look, from another thread. A partition revoked and
/// assigned again meanwhile starts its new assignment at its committed offset, below the position
/// that was looked at: seeking it there would skip every record in between. So a track belongs to
/// the tenure it was made in, and an answer applied in another tenure is dropped (the partition is
/// watched afresh); the consumer applies answers where no assignment can change under them.
package struct PartitionStallWatch: Sendable {
    package typealias Instant = ContinuousClock.Instant

    package let bound: Duration

    private struct Track: Sendable {
        /// The consumer's tenure when the position was seen.
        var tenure: UInt64
        var position: Int64
        /// Since when the position has not moved (or since the last look at the broker's end).
        var since: Instant
        /// The broker's end was asked for and not answered yet.
        var asking = false
        var stalled = false
    }

    private var tracks: [KafkaTopicPartition: Track] = [:]

    package init(bound: Duration) {
        self.bound = bound
    }

    /// The partitions reported stalled and not yet moving again.
    package var stalled: Set<KafkaTopicPartition> { Set(tracks.filter(\.value.stalled).keys) }

    /// What `observe` found.
    package struct Observation: Sendable, Equatable {
        /// Ask the broker for these partitions' ends (`answered` with each).
        package var ask: [KafkaTopicPartition] = []
        /// Stalled partitions that moved again.
        package var recovered: [KafkaTopicPartition] = []
    }

    /// The positions of the partitions being fetched now (assigned and not paused), seen in `tenure`.
    /// A partition missing from `positions` (paused, revoked, no position yet), or seen in an earlier
    /// tenure, is forgotten and watched afresh; a stalled one forgotten counts as recovered.
    package mutating func observe(
        positions: [KafkaTopicPartition: Int64], tenure: UInt64, now: Instant
    ) -> Observation {
        var observation = Observation()
        for (partition, track) in tracks where positions[partition] == nil || track.tenure != tenure {
            if track.stalled { observation.recovered.append(partition) }
            tracks[partition] = nil
        }
        for (partition, position) in positions {
            guard var track = tracks[partition] else {
                tracks[partition] = Track(tenure: tenure, position: position, since: now)
                continue
            }
            if track.position != position {
                if track.stalled { observation.recovered.append(partition) }
                track = Track(tenure: tenure, position: position, since: now)
            } else if !track.asking, track.since.duration(to: now) >= bound {
                track.asking = true
                observation.ask.append(partition)
            }
            tracks[partition] = track
        }
        observation.ask.sort()
        observation.recovered.sort()
        return observation
    }

    /// What to do about a partition whose end the broker gave.
    package enum Verdict: Sendable, Equatable {
        /// Nothing waits beyond its position (or it moved meanwhile): an idle partition.
        case idle
        /// Records wait and the position has not moved for `bound`: seek it to `position`. `first`
        /// is true when it was not stalled before (report it once, count every seek).
        case stalled(position: Int64, end: Int64, first: Bool)
    }

    /// The broker's end of `partition` (one past its last record), asked for because its position
    /// had not moved; `nil` when the broker did not answer (asked again after another `bound`).
    /// `tenure` and `position` are the consumer's now, as the answer is applied (`position` nil when
    /// the partition is not being fetched): an answer about an earlier assignment of the partition, or
    /// about a position it has since left (it read on while the broker was asked), says nothing about
    /// where it is now, and is dropped: a seek there would read records again or skip them.
    package mutating func answered(
        _ partition: KafkaTopicPartition, end: Int64?, tenure: UInt64, position: Int64?, now: Instant
    ) -> Verdict {
        guard var track = tracks[partition], track.asking else { return .idle }
        track.asking = false
        // The next look forgets or restarts the track (and reports it recovered if it was stalled).
        guard track.tenure == tenure, track.position == position else {
            tracks[partition] = track
            return .idle
        }
        track.since = now
        defer { tracks[partition] = track }
        guard let end, end > track.position else { return .idle }
        let first = !track.stalled
        track.stalled = true
        return .stalled(position: track.position, end: end, first: first)
    }
}

/// What a consumer's stall watch reports.
package enum KafkaPartitionStall: Sendable, Equatable {
    /// Records wait beyond `position` and it has not moved for the bound: the consumer sought the
    /// partition to `position` (again, when not `first`).
    case stalled(KafkaTopicPartition, position: Int64, end: Int64, first: Bool)
    /// A stalled partition moved again (or was paused or revoked).
    case recovered(KafkaTopicPartition)
}
