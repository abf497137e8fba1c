extension EventRun {
    /// One event's life, from decoded to done or abandoned. Pure: the run feeds it each thing that
    /// happens to the event (an input) and performs the action it returns; it reads no clock, takes
    /// no lock and does not care which thread feeds it, as long as one input is fed at a time (the
    /// run's steps hand the event from one to the next, so they are).
    ///
    /// ```
    ///  decoded ──attempt──▶ sending(n) ──answered: final──▶ publishing(dead letter) ─stored─┐
    ///     │                  │    ▲                      └─▶ publishing(result) ◀──────────┘
    ///     │                  │    │attempt                        │stored
    ///     │   answered: retry│  due(n) ◀──waited── waiting(n)     ▼
    ///     │                  └──────────────────────▲           done
    ///     └─endsUnsent (invalid, too old)─▶ publishing(…)
    ///
    ///  abandoned: the lease ended before an attempt or a wait, a wait was cancelled (shutdown), or
    ///  the publisher gave the record up. Its offset stays uncommitted; the next owner reads it again.
    /// ```
    ///
    /// Every input after `done` or `abandoned` is ignored (`.none`): an event ends once, so the
    /// pipeline's in-flight room and the offset are given back once, whatever arrives late.
    struct StateMachine: Sendable, Hashable {
        enum State: Sendable, Hashable {
            /// Decoded, or found invalid; nothing sent yet.
            case decoded
            /// Attempt `attempt` is with the sender; its answer is awaited.
            case sending(attempt: Int)
            /// `attempts` made; the next is due now, once the gate is read.
            case due(attempts: Int)
            /// `attempts` made; the next waits for a backoff or the device token's throttle.
            case waiting(attempts: Int, Wait)
            /// The result is final; this record is with the publisher (the dead letter first).
            case publishing(Record)
            /// The result (and its dead letter) is stored: the offset may be committed.
            case done
            /// Given up here; the offset stays uncommitted.
            case abandoned
        }

        enum Wait: Sendable, Hashable {
            /// The retry policy's backoff after a "later" answer (429, 500, 503, a lost connection).
            case backoff
            /// The device token is throttled (APNs said 429 for it): every event for it waits.
            case throttle
        }

        /// What the publisher is storing for the event.
        enum Record: Sendable, Hashable {
            case deadLetter
            case result
        }

        /// What the next attempt must pass, read by the run just before it is fed: whether the
        /// partition is still this member's, how long the token's throttle still holds, and whether
        /// the notification's `apns-expiration` has passed (read only when `attempts > 0`: an
        /// event's first attempt is made even if its expiration passed, and APNs decides).
        struct Gate: Sendable, Hashable {
            var leaseActive = true
            var throttled: Duration? = nil
            var expired = false
        }

        /// What an answer (or the lack of one) makes of the event, as `EventProcessor.answered`
        /// classifies it.
        enum Verdict: Sendable, Hashable {
            /// The result is final (delivered, rejected, unregistered, expired, failed or gave up);
            /// `deadLetter`: it goes to the dead-letter topic first. `sent == false`: the client
            /// refused the request before sending it, so the attempt does not count.
            case final(deadLetter: Bool, sent: Bool = true)
            /// Try again at once, through the gate (a token now throttled waits for the throttle).
            case retryNow
            /// Try again after `wait` (the retry policy's backoff).
            case retry(after: Duration)
        }

        /// How the publisher ended with a record.
        enum Publication: Sendable, Hashable {
            /// Kafka stored it.
            case stored
            /// Kafka refused it as it is; its smaller form (a dead letter without the value, a
            /// result without metadata) was stored instead. The event goes on as if stored.
            case storedDegraded
            /// Given up (a fatal producer error, shutdown): the event stays uncommitted.
            case abandoned
        }

        enum Action: Sendable, Hashable {
            /// Read the gate and feed `attempt(_:)`.
            case readGate
            /// Send attempt `attempt` (1-based) now.
            case send(attempt: Int)
            /// Feed `waited(cancelled:)` after `duration` (or early, cancelled: a shutdown, the
            /// partition handed over).
            case wait(Duration)
            /// The notification expired while it waited: its outcome is `expired`; publish its result.
            case expire
            /// Publish the dead letter, then feed `published(_:)`.
            case publishDeadLetter
            /// Publish the result event, then feed `published(_:)`.
            case publishResult
            /// The event ended: give back its room; `done`: its offset may be committed (else abandoned).
            case end(done: Bool)
            /// Nothing to do (an input after the end).
            case none
        }

        private(set) var state: State = .decoded
        /// Requests sent so far (the result's `attempts`).
        private(set) var attempts = 0
        /// Inputs that arrived after the event had ended, ignored (for tests and assertions).
        private(set) var ignored = 0

        init() {}

        /// Decoded, or the next attempt due (`Action.readGate`): the gate decides between sending,
        /// waiting for the token's throttle, ending expired, and abandoning.
        mutating func attempt(_ gate: Gate) -> Action {
            switch state {
            case .decoded, .due:
                break
            case .sending, .waiting, .publishing:
                preconditionFailure("an attempt for an event in state \(state)")
            case .done, .abandoned:
                return ignore()
            }
            guard gate.leaseActive else {
                // The partition is handed over or gone: its next owner pushes this event.
                state = .abandoned
                return .end(done: false)
            }
            if let wait = gate.throttled {
                state = .waiting(attempts: attempts, .throttle)
                return .wait(wait)
            }
            if attempts > 0, gate.expired {
                state = .publishing(.result)
                return .expire
            }
            attempts += 1
            state = .sending(attempt: attempts)
            return .send(attempt: attempts)
        }

        /// The event ends before any attempt: invalid, or too old to send.
        mutating func endsUnsent(deadLetter: Bool) -> Action {
            switch state {
            case .decoded:
                return publish(deadLetter: deadLetter)
            case .done, .abandoned:
                return ignore()
            default:
                preconditionFailure("an event ended unsent in state \(state)")
            }
        }

        /// The sender's answer to the attempt in flight, classified. `leaseActive` is read for a
        /// retry after a wait only: a final answer is published whoever owns the partition now (the
        /// push happened), and an immediate retry reads the gate.
        mutating func answered(_ verdict: Verdict, leaseActive: Bool = true) -> Action {
            switch state {
            case .sending:
                break
            case .done, .abandoned:
                return ignore()
            default:
                preconditionFailure("an answer for an event in state \(state)")
            }
            switch verdict {
            case .final(let deadLetter, let sent):
                if !sent { attempts -= 1 }
                return publish(deadLetter: deadLetter)
            case .retryNow:
                state = .due(attempts: attempts)
                return .readGate
            case .retry(let wait):
                guard leaseActive else {
                    // Handed over already: its waits were cancelled, and this one would hold the
                    // handover's drain for nothing. The next owner pushes it.
                    state = .abandoned
                    return .end(done: false)
                }
                state = .waiting(attempts: attempts, .backoff)
                return .wait(wait)
            }
        }

        /// The wait ended: on time (the next attempt is due), or cancelled.
        mutating func waited(cancelled: Bool) -> Action {
            switch state {
            case .waiting(let attempts, _):
                if cancelled {
                    state = .abandoned
                    return .end(done: false)
                }
                state = .due(attempts: attempts)
                return .readGate
            case .done, .abandoned:
                return ignore()
            default:
                preconditionFailure("a wait ended for an event in state \(state)")
            }
        }

        /// The publisher is done with the record `publishing` names.
        mutating func published(_ publication: Publication) -> Action {
            switch state {
            case .publishing(let record):
                guard publication != .abandoned else {
                    state = .abandoned
                    return .end(done: false)
                }
                switch record {
                case .deadLetter:
                    // A result event is out only once its dead letter is stored.
                    state = .publishing(.result)
                    return .publishResult
                case .result:
                    state = .done
                    return .end(done: true)
                }
            case .done, .abandoned:
                return ignore()
            default:
                preconditionFailure("a publication for an event in state \(state)")
            }
        }

        private mutating func publish(deadLetter: Bool) -> Action {
            state = .publishing(deadLetter ? .deadLetter : .result)
            return deadLetter ? .publishDeadLetter : .publishResult
        }

        private mutating func ignore() -> Action {
            ignored += 1
            return .none
        }
    }
}
