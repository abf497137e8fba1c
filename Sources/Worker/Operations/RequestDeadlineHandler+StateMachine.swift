extension RequestDeadlineHandler {
    /// Which deadline a connection is under and what the tracker hears, changed only through its
    /// transitions. Pure: the handler arms the timer and tells the tracker.
    struct StateMachine {
        /// The timeout to arm afresh.
        enum Deadline: Equatable {
            /// A request must arrive whole.
            case request
            /// A kept-alive connection may send nothing between requests.
            case idle
            /// The oldest answer not yet written must be written whole (to the socket).
            case write
        }

        struct Action: Equatable {
            var arm: Deadline?
            var phase: ConnectionTracker.Phase?

            static let none = Action()
        }

        private enum State {
            /// Waiting for a request (or the rest of one).
            case receiving
            /// Kept alive between requests: the next one's first byte starts its deadline.
            case idle
            /// Requests came in whole and `unsent` answers are not written yet (more than one when
            /// the client pipelines).
            case answering(unsent: Int)
        }

        private var state = State.receiving
        /// Bytes of a next request came while answering: its deadline is the request time once the
        /// answers are out, not the idle time.
        private var readWhileAnswering = false
        /// The channel takes more bytes (NIO's write buffer is under its high-water mark).
        private var writable = true

        mutating func bytesRead() -> Action {
            switch state {
            case .idle:
                state = .receiving
                return Action(arm: .request)
            case .answering:
                readWhileAnswering = true
                return .none
            case .receiving:
                return .none
            }
        }

        /// A request came in whole. Its answer is under the write deadline from now, unless an older
        /// one's already is (pipelining).
        mutating func requestReceived() -> Action {
            if case .answering(let unsent) = state {
                state = .answering(unsent: unsent + 1)
                return .none
            }
            state = .answering(unsent: 1)
            readWhileAnswering = false
            return Action(arm: .write, phase: answeringPhase)
        }

        /// An answer was written whole and the connection is kept alive.
        mutating func responseSent() -> Action {
            guard case .answering(let unsent) = state else { return .none }
            if unsent > 1 {
                // The next answer gets a write time of its own: a client reading slowly but steadily
                // is served, one that stopped reading is closed a write time after its last answer.
                state = .answering(unsent: unsent - 1)
                return Action(arm: .write)
            }
            if readWhileAnswering {
                readWhileAnswering = false
                state = .receiving
                return Action(arm: .request, phase: .idle)
            }
            state = .idle
            return Action(arm: .idle, phase: .idle)
        }

        /// NIO's write buffer crossed its high-water mark (not writable) or fell back under the
        /// low one: while answering, the tracker hears whether the client is reading its answers.
        mutating func writabilityChanged(isWritable: Bool) -> Action {
            writable = isWritable
            guard case .answering = state else { return .none }
            return Action(phase: answeringPhase)
        }

        private var answeringPhase: ConnectionTracker.Phase { writable ? .answering : .stalled }
    }
}
