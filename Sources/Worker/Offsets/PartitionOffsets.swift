import DequeModule

/// One partition's records between "read" and "done", in offset order, and the offset that can be
/// committed: the lowest one still in flight (everything below it is done), or one past the last
/// done record when nothing is in flight.
///
/// Records of a partition are read in increasing offset order but finish in any order. Offsets may
/// have gaps (compaction, transaction markers), so entries are kept as a sorted deque rather than
/// indexed by offset; finishing is a binary search, and the done prefix is dropped as it forms.
struct PartitionOffsets {
    private var entries: Deque<(offset: Int64, done: Bool)> = []
    /// One past the highest offset whose prefix is complete; `nil` before anything finished.
    private(set) var completedThrough: Int64?
    /// The last offset handed to a commit.
    private(set) var committed: Int64?

    /// Records read and not yet done.
    private(set) var inFlight = 0

    /// A record was read. Offsets must increase; a replayed or older offset is ignored.
    mutating func start(_ offset: Int64) {
        if let last = entries.last?.offset, offset <= last { return }
        if let completedThrough, offset < completedThrough { return }
        entries.append((offset, false))
        inFlight += 1
    }

    /// A record is done (its result, and dead letter if any, acknowledged by Kafka).
    /// Returns false for an offset that is not in flight.
    @discardableResult
    mutating func finish(_ offset: Int64) -> Bool {
        guard let index = indexOf(offset), !entries[index].done else { return false }
        entries[index].done = true
        inFlight -= 1
        while let first = entries.first, first.done {
            entries.removeFirst()
            completedThrough = first.offset + 1
        }
        return true
    }

    /// The offset to commit now (the next one to read: everything below it is done), or `nil` when
    /// nothing has finished yet or it has not moved since the last commit.
    var commitCandidate: Int64? {
        guard completedThrough != nil, let candidate = entries.first?.offset ?? completedThrough else { return nil }
        return candidate == committed ? nil : candidate
    }

    mutating func markCommitted(_ offset: Int64) {
        committed = max(committed ?? offset, offset)
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
