/// One reason's cursor in one partition of a dead-letter topic: which dead letters of that reason
/// earlier runs replayed.
///
/// Stored as the committed offset of the reason's cursor group plus commit metadata
/// (`CommitMetadata`): the offset is the lowest dead letter of the reason that no run has replayed
/// (everything below it is replayed, or of another reason), and the metadata names what is handled
/// above it. So a run that leaves a dead letter alone (filtered by source topic or time, at the
/// replay limit, without a destination) leaves it replayable, and what it replayed past it is not
/// replayed again. Where the broker drops commit metadata, the offset alone still never passes a
/// dead letter nobody replayed; what was replayed above it is then replayed again by the next run.
struct ReplayCursor: Equatable, Sendable {
    /// The lowest offset not handled (the offset to commit).
    private(set) var low: Int64
    /// Handled offsets above `low`.
    private(set) var handled: OffsetRanges
    /// The last offset this run looked at, so the offsets between two records it read (none
    /// stored there: transaction markers, records deleted by retention) count as handled.
    private var scannedThrough: Int64?

    init(low: Int64, handled: OffsetRanges = OffsetRanges()) {
        self.low = low
        self.handled = handled
        self.handled.removeAll(below: low + 1)
    }

    /// Whether an earlier run handled `offset`.
    func isHandled(_ offset: Int64) -> Bool {
        offset < low || handled.contains(offset)
    }

    /// The run starts reading the partition at `offset` (at or below `low`): nothing before it counts.
    mutating func startScanning(at offset: Int64) {
        scannedThrough = offset - 1
    }

    /// The run read the record at `offset` (offsets increase): `done` when it was replayed now or
    /// before, or is not of this cursor's reason; a dead letter of the reason left alone stays open.
    mutating func scanned(_ offset: Int64, done: Bool) {
        if let scannedThrough, scannedThrough + 1 < offset {
            handled.insert(max(scannedThrough + 1, low)..<offset)
        }
        scannedThrough = offset
        if done, offset >= low { handled.insert(offset) }
        // The low end moves over whatever is now handled from it on (ranges never touch, so one
        // range at most starts there).
        if let first = handled.ranges.first, first.lowerBound == low {
            low = first.upperBound
            handled.removeAll(below: low)
        }
    }

    /// The committed offset and metadata that store this cursor.
    func metadata(reservation: CommitMetadata.Reservation?) -> CommitMetadata {
        CommitMetadata(committed: low, done: handled, reservation: reservation)
    }
}
