import Kafka

/// One assignment's learning of where its partitions start, behind one lock. The assignment handler
/// feeds it what comes in (the committed offsets with their done records, then each partition's end
/// as it is answered) and asks it for what to start from twice: when everything is in, and when the
/// assignment's budget passes; only the first ask is answered. Past the budget, a partition whose end
/// has not come loses its done records (read back and owed) and runs them again; the others keep
/// theirs, however slow one leader is.
struct ProgressLearning {
    enum State {
        /// The committed offsets and their done records are being read: nothing is known yet.
        case reading
        /// Read; each partition's end is added as it is answered.
        case learningEnds(StartingProgress, ends: [KafkaTopicPartition: Int64])
        /// What to start from was given; what comes later is dropped.
        case given
    }

    /// What the assignment starts from.
    enum Answer: Equatable {
        /// The committed offsets were not read (in time, or at all): every partition starts with
        /// nothing known done, and what its last owner (or this member) finished runs again.
        case unread
        case decided(StartingProgress.Decision)
    }

    private(set) var state = State.reading

    /// The committed offsets and their done records, with what this member owes itself.
    mutating func read(_ starting: StartingProgress) {
        guard case .reading = state else { return }
        state = .learningEnds(starting, ends: [:])
    }

    /// A partition's end was answered.
    mutating func learned(end: Int64, of partition: KafkaTopicPartition) {
        guard case .learningEnds(let starting, var ends) = state else { return }
        ends[partition] = end
        state = .learningEnds(starting, ends: ends)
    }

    /// What to start from, with what has come in so far: given once, nil afterwards.
    mutating func give() -> Answer? {
        switch state {
        case .reading:
            state = .given
            return .unread
        case .learningEnds(let starting, let ends):
            state = .given
            return .decided(starting.decided(ends: ends))
        case .given:
            return nil
        }
    }
}
