import DequeModule

/// One partition's records between "read" and "done", in offset order, and what a commit records:
/// the offset (the lowest one still in flight: everything below it is done, or one past the last
/// done record) and which records above it are done too.
///
/// Records of a partition are read in increasing offset order but finish in any order. Offsets may
/// have gaps (compaction, transaction markers), so entries are kept as a sorted deque rather than
/// indexed by offset; finishing is a binary search, and the done prefix is dropped as it forms. The
/// done records above the first one still in flight are what a crash or a hand-over would otherwise
/// push again: they go into the commit's metadata (`CommitMetadata`), and the partition's next owner
/// starts with them as `knownDone` and does not run them again.
struct PartitionOffsets {
    enum Mark: Equatable {
        case inFlight
        case done
        /// Given up at a hand-over before it was pushed (it waited for a retry): not done, so the
        /// commit stays below it and the next owner runs it, but nothing here waits for it any more.
        case abandoned
    }

    private var entries: Deque<(offset: Int64, mark: Mark)> = []
    /// One past the highest offset whose prefix is complete; `nil` before anything finished.
    private(set) var completedThrough: Int64?
    /// Records done before this lease (by the partition's last owner, or by this member before the
    /// partition went away and came back), from the committed offset's metadata: not run again.
    private(set) var knownDone = OffsetRanges()
    /// The committed offset `knownDone` came with. A record below it means librdkafka reset the
    /// position (an offset out of range: a recreated topic): `knownDone` then describes other
    /// records, and is dropped.
    private var knownFrom: Int64?
    /// Records read below `knownDone`'s top that it does not name, and how many a true record leaves
    /// at most (`DoneRecordBounds`): one more, and `knownDone` is not trusted from there on.
    private var notDoneInside: Int64 = 0
    private var notDoneAllowed: Int64 = .max

    /// Where this lease started reading (the committed offset it was seeded with, else its first
    /// record); `nil` once the position went back below what was read (a reset: a recreated topic),
    /// after which nothing this lease knows may be carried to a later one.
    private(set) var startOffset: Int64?

    /// The last commit handed out and stored: its offset and the `version` it was taken at.
    private(set) var committed: Int64?
    private var committedVersion: UInt64 = 0
    /// Bumped whenever what a commit would record changes.
    private var version: UInt64 = 0

    /// Records read and not yet done (abandoned ones excluded).
    private(set) var inFlight = 0

    /// Starts from what is known done at and above the committed offset (its metadata, and what
    /// this member finished there before but could not commit), trusted while no more than
    /// `notDoneAllowed` records read inside it are not done.
    mutating func seed(committed offset: Int64, done: OffsetRanges, notDoneAllowed: Int64 = .max) {
        self.notDoneAllowed = notDoneAllowed
        knownFrom = offset
        startOffset = offset
        knownDone = done
        knownDone.removeAll(below: offset)
        if !knownDone.isEmpty { version += 1 }
    }

    enum Start: Equatable {
        /// Tracked: run it.
        case run
        /// Done already (`knownDone`): counted as done, not run.
        case alreadyDone
        /// A repeated or older offset: not tracked.
        case ignored
        /// Tracked: run it. One record too many read inside `knownDone` and not done there: what it
        /// names from here on is dropped (`DoneRecordBounds`), and run.
        case refusedKnownDone

        /// Tracked and run (not done already, not ignored).
        var runs: Bool { self == .run || self == .refusedKnownDone }
    }

    /// A record was read. Offsets must increase; a repeated or older offset is ignored.
    mutating func start(_ offset: Int64) -> Start {
        if let knownFrom, offset < knownFrom {
            // The position went back below the committed offset: not the records knownDone names.
            self.knownFrom = nil
            knownDone = OffsetRanges()
            startOffset = nil
        }
        if entries.isEmpty, completedThrough == nil, knownFrom == nil, startOffset == nil, version == 0 {
            startOffset = offset
        }
        if let last = entries.last?.offset, offset <= last {
            startOffset = nil
            return .ignored
        }
        if let completedThrough, offset < completedThrough {
            startOffset = nil
            return .ignored
        }
        if knownDone.contains(offset) {
            entries.append((offset, .done))
            version += 1
            dropDonePrefix()
            return .alreadyDone
        }
        let refused = refusesKnownDone(at: offset)
        entries.append((offset, .inFlight))
        inFlight += 1
        return refused ? .refusedKnownDone : .run
    }

    /// Counts a record read inside `knownDone` that it does not name. At the stretches' check
    /// (`DoneRecordBounds.refusal`) a stretch of offsets may hold any number of records: only reading
    /// them shows whether more were left not done than a writer could have had unfinished. Past
    /// that, what `knownDone` names from `offset` on is dropped (those below are read already).
    private mutating func refusesKnownDone(at offset: Int64) -> Bool {
        guard let top = knownDone.ranges.last?.upperBound, offset < top else { return false }
        notDoneInside += 1
        guard notDoneInside > notDoneAllowed else { return false }
        knownDone.removeAll(atOrAbove: offset)
        version += 1
        return true
    }

    /// A record is done (its result, and dead letter if any, acknowledged by Kafka).
    /// Returns false for an offset that is not in flight.
    @discardableResult
    mutating func finish(_ offset: Int64) -> Bool {
        guard let index = indexOf(offset), entries[index].mark == .inFlight else { return false }
        entries[index].mark = .done
        inFlight -= 1
        version += 1
        dropDonePrefix()
        return true
    }

    /// A record in flight was given up (`Mark.abandoned`). Returns false for one not in flight.
    @discardableResult
    mutating func abandon(_ offset: Int64) -> Bool {
        guard let index = indexOf(offset), entries[index].mark == .inFlight else { return false }
        entries[index].mark = .abandoned
        inFlight -= 1
        return true
    }

    private mutating func dropDonePrefix() {
        while let first = entries.first, first.mark == .done {
            entries.removeFirst()
            completedThrough = first.offset + 1
        }
        if let completedThrough { knownDone.removeAll(below: completedThrough) }
    }

    /// What to commit now: the offset and the done records above it, or `nil` when nothing has
    /// finished yet or nothing changed since the last commit.
    var commitCandidate: (offset: Int64, done: OffsetRanges, version: UInt64)? {
        // Before its first record is read, a partition seeded with done records still has them to
        // commit (or to owe itself, should the lease end now): from the offset it was seeded with.
        guard var offset = entries.first?.offset ?? completedThrough ?? (knownDone.isEmpty ? nil : knownFrom) else {
            return nil
        }
        if entries.isEmpty, let run = knownDone.ranges.first, run.lowerBound == offset {
            // Known done from here on without a record read yet: the offset moves over them.
            offset = run.upperBound
        }
        // Unchanged since the last commit, or nothing finished yet: nothing to record.
        guard version != committedVersion || (offset != committed && completedThrough != nil) else { return nil }
        // Runs of consecutive done entries (the offsets between two of them hold no record), in
        // offset order, merged with what is known done in one pass.
        var runs: [Range<Int64>] = []
        var runStart: Int64?
        var previous: Int64 = offset
        for entry in entries {
            if entry.mark == .done {
                if runStart == nil { runStart = entry.offset }
            } else if let start = runStart {
                runs.append(start..<previous + 1)
                runStart = nil
            }
            previous = entry.offset
        }
        if let start = runStart { runs.append(start..<previous + 1) }
        var done = knownDone.union(sorted: runs)
        done.removeAll(below: offset + 1)
        return (offset, done, version)
    }

    /// The committed offset as the broker has it, as far as this lease knows: its last commit, or the
    /// one it started from.
    var lastStored: Int64? { committed ?? knownFrom }

    /// The commit taken at `version` with `offset` is stored.
    mutating func markCommitted(_ offset: Int64, version: UInt64) {
        committed = max(committed ?? offset, offset)
        committedVersion = max(committedVersion, version)
    }

    private func indexOf(_ offset: Int64) -> Int? {
        var low = 0
        var high = entries.count - 1
        while low <= high {
            let middle = (low + high) / 2
            let value = entries[middle].offset
            if value == offset { return middle }
            if value < offset { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }
}
