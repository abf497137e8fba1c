import Testing

@testable import Worker

/// One event's life as its state machine sees it: every transition, with no sender, scheduler or
/// Kafka (those are EventProcessorTests' and the integration suites').
@Suite("One event's life: decoded, sending, waiting, publishing, done or abandoned")
struct EventStateMachineTests {
    typealias Machine = EventRun.StateMachine
    typealias Gate = Machine.Gate
    /// A seeded generator: the same lives every run.
    typealias SplitMix = NotificationEventRobustnessTests.SplitMix64

    static let open = Gate()
    static let leaseEnded = Gate(leaseActive: false)

    /// A machine with its first attempt in flight.
    static func sending() -> Machine {
        var machine = Machine()
        #expect(machine.attempt(open) == .send(attempt: 1))
        return machine
    }

    @Test("a decoded event with its partition still here is sent: attempt 1")
    func decodedIsSent() {
        var machine = Machine()
        #expect(machine.attempt(Self.open) == .send(attempt: 1))
        #expect(machine.state == .sending(attempt: 1))
        #expect(machine.attempts == 1)
    }

    @Test("a decoded event whose partition was handed over is abandoned unsent: the next owner pushes it")
    func decodedAfterHandoverIsAbandoned() {
        var machine = Machine()
        #expect(machine.attempt(Self.leaseEnded) == .end(done: false))
        #expect(machine.state == .abandoned)
        #expect(machine.attempts == 0)
    }

    @Test("a decoded event for a throttled token waits for the throttle, then is sent")
    func decodedThrottledWaitsThenSends() {
        var machine = Machine()
        #expect(machine.attempt(Gate(throttled: .seconds(2))) == .wait(.seconds(2)))
        #expect(machine.state == .waiting(attempts: 0, .throttle))
        #expect(machine.waited(cancelled: false) == .readGate)
        #expect(machine.state == .due(attempts: 0))
        #expect(machine.attempt(Self.open) == .send(attempt: 1))
    }

    @Test("the first attempt is made even when the notification's expiration has passed: APNs decides")
    func firstAttemptIgnoresExpiration() {
        var machine = Machine()
        #expect(machine.attempt(Gate(expired: true)) == .send(attempt: 1))
    }

    @Test("an invalid record ends at once: its dead letter, then its result, then done")
    func invalidRecordPublishesDeadLetterThenResult() {
        var machine = Machine()
        #expect(machine.endsUnsent(deadLetter: true) == .publishDeadLetter)
        #expect(machine.state == .publishing(.deadLetter))
        #expect(machine.published(.stored) == .publishResult)
        #expect(machine.state == .publishing(.result))
        #expect(machine.published(.stored) == .end(done: true))
        #expect(machine.state == .done)
        #expect(machine.attempts == 0)
    }

    @Test("a record too old to send ends with its result only (no dead letter)")
    func staleRecordPublishesResultOnly() {
        var machine = Machine()
        #expect(machine.endsUnsent(deadLetter: false) == .publishResult)
        #expect(machine.published(.stored) == .end(done: true))
        #expect(machine.state == .done)
    }

    @Test("a final answer publishes the result, with the attempt counted")
    func finalAnswerPublishesResult() {
        var machine = Self.sending()
        #expect(machine.answered(.final(deadLetter: false)) == .publishResult)
        #expect(machine.state == .publishing(.result))
        #expect(machine.attempts == 1)
        #expect(machine.published(.stored) == .end(done: true))
    }

    @Test("a final answer is published even after the partition was handed over: the push happened")
    func finalAnswerAfterHandoverIsPublished() {
        var machine = Self.sending()
        #expect(machine.answered(.final(deadLetter: false), leaseActive: false) == .publishResult)
    }

    @Test("a request the client refused before sending does not count as an attempt; it is dead-lettered")
    func refusedBeforeSendingIsNotAnAttempt() {
        var machine = Self.sending()
        #expect(machine.answered(.final(deadLetter: true, sent: false)) == .publishDeadLetter)
        #expect(machine.attempts == 0)
    }

    @Test("a retry now reads the gate again: a token throttled meanwhile waits, then attempt 2 is sent")
    func retryNowReadsTheGate() {
        var machine = Self.sending()
        #expect(machine.answered(.retryNow) == .readGate)
        #expect(machine.state == .due(attempts: 1))
        #expect(machine.attempt(Gate(throttled: .milliseconds(500))) == .wait(.milliseconds(500)))
        #expect(machine.state == .waiting(attempts: 1, .throttle))
        #expect(machine.waited(cancelled: false) == .readGate)
        #expect(machine.attempt(Self.open) == .send(attempt: 2))
        #expect(machine.attempts == 2)
    }

    @Test("a retry after a backoff waits, then sends the next attempt")
    func retryAfterBackoff() {
        var machine = Self.sending()
        #expect(machine.answered(.retry(after: .milliseconds(300))) == .wait(.milliseconds(300)))
        #expect(machine.state == .waiting(attempts: 1, .backoff))
        #expect(machine.waited(cancelled: false) == .readGate)
        #expect(machine.attempt(Self.open) == .send(attempt: 2))
    }

    @Test("a retry answered after the partition was handed over is not scheduled: abandoned at once")
    func retryAfterHandoverIsAbandoned() {
        var machine = Self.sending()
        #expect(machine.answered(.retry(after: .seconds(1)), leaseActive: false) == .end(done: false))
        #expect(machine.state == .abandoned)
    }

    @Test("a retry past the shutdown deadline: the wait is cancelled and the event abandoned, uncommitted")
    func retryPastShutdownDeadlineIsAbandoned() {
        var machine = Self.sending()
        #expect(machine.answered(.retry(after: .seconds(30))) == .wait(.seconds(30)))
        #expect(machine.waited(cancelled: true) == .end(done: false))
        #expect(machine.state == .abandoned)
        #expect(machine.attempts == 1)
    }

    @Test("a retry whose notification expired while it waited ends expired, its result published")
    func expiredWhileWaiting() {
        var machine = Self.sending()
        _ = machine.answered(.retry(after: .seconds(1)))
        _ = machine.waited(cancelled: false)
        #expect(machine.attempt(Gate(expired: true)) == .expire)
        #expect(machine.state == .publishing(.result))
        #expect(machine.attempts == 1)
        #expect(machine.published(.stored) == .end(done: true))
    }

    @Test("the lease is read before the throttle: a handed-over event does not wait for a throttle")
    func leaseBeforeThrottle() {
        var machine = Self.sending()
        _ = machine.answered(.retryNow)
        #expect(machine.attempt(Gate(leaseActive: false, throttled: .seconds(5))) == .end(done: false))
    }

    @Test("a dead letter refused then published degraded: the result follows, and the event is done")
    func deadLetterRefusedThenDegraded() {
        var machine = Self.sending()
        #expect(machine.answered(.final(deadLetter: true)) == .publishDeadLetter)
        #expect(machine.published(.storedDegraded) == .publishResult)
        #expect(machine.state == .publishing(.result))
        #expect(machine.published(.storedDegraded) == .end(done: true))
        #expect(machine.state == .done)
    }

    @Test("a dead letter the publisher gives up (a fatal producer error, shutdown): no result, abandoned")
    func deadLetterAbandoned() {
        var machine = Self.sending()
        _ = machine.answered(.final(deadLetter: true))
        #expect(machine.published(.abandoned) == .end(done: false))
        #expect(machine.state == .abandoned)
    }

    @Test("a result the publisher gives up: abandoned, uncommitted")
    func resultAbandoned() {
        var machine = Self.sending()
        _ = machine.answered(.final(deadLetter: false))
        #expect(machine.published(.abandoned) == .end(done: false))
        #expect(machine.state == .abandoned)
    }

    @Test("an answer, a wait or a publication after abandonment is ignored: the event ends once")
    func inputsAfterAbandonmentAreIgnored() {
        var machine = Self.sending()
        _ = machine.answered(.retry(after: .seconds(1)))
        #expect(machine.waited(cancelled: true) == .end(done: false))
        #expect(machine.answered(.final(deadLetter: false)) == .none)
        #expect(machine.waited(cancelled: false) == .none)
        #expect(machine.published(.stored) == .none)
        #expect(machine.attempt(Self.open) == .none)
        #expect(machine.endsUnsent(deadLetter: true) == .none)
        #expect(machine.state == .abandoned)
        #expect(machine.ignored == 5)
    }

    @Test("inputs after done are ignored too: the offset is given back once")
    func inputsAfterDoneAreIgnored() {
        var machine = Self.sending()
        _ = machine.answered(.final(deadLetter: false))
        #expect(machine.published(.stored) == .end(done: true))
        #expect(machine.published(.stored) == .none)
        #expect(machine.answered(.retryNow) == .none)
        #expect(machine.state == .done)
    }

    @Test("random lives of 5,000 events: each ends exactly once, attempts number the requests sent")
    func randomLivesEndOnce() {
        var random = SplitMix(state: 0x5EED)
        var ends = [String: Int]()
        for _ in 0..<5000 {
            var machine = Machine()
            var action = Self.first(&machine, &random)
            var finishes = 0
            var sent = 0
            var unsent = 0
            var steps = 0
            while steps < 100 {
                steps += 1
                switch action {
                case .send(let attempt):
                    sent += 1
                    #expect(attempt == sent - unsent, "attempts are numbered 1, 2, … in order")
                    let verdicts: [Machine.Verdict] = [
                        .final(deadLetter: false), .final(deadLetter: true), .final(deadLetter: true, sent: false),
                        .retryNow, .retry(after: .milliseconds(10)),
                    ]
                    let verdict = verdicts[Int(random.next() % UInt64(verdicts.count))]
                    if case .final(_, false) = verdict { unsent += 1 }
                    action = machine.answered(verdict, leaseActive: random.next() % 8 != 0)
                case .readGate:
                    action = machine.attempt(Self.gate(&random))
                case .wait:
                    action = machine.waited(cancelled: random.next() % 10 == 0)
                case .publishDeadLetter, .publishResult, .expire:
                    let publications: [Machine.Publication] = [.stored, .stored, .storedDegraded, .abandoned]
                    action = machine.published(publications[Int(random.next() % 4)])
                case .end(let done):
                    finishes += 1
                    ends[done ? "done" : "abandoned", default: 0] += 1
                    #expect(machine.state == (done ? .done : .abandoned))
                    action = .none
                case .none:
                    steps = 100
                }
            }
            #expect(finishes == 1, "every event ends exactly once")
            #expect(machine.attempts == sent - unsent)
            #expect(machine.attempts >= 0)
        }
        #expect((ends["done"] ?? 0) > 1000 && (ends["abandoned"] ?? 0) > 100, "both ends were reached: \(ends)")
    }

    static func first(_ machine: inout Machine, _ random: inout SplitMix) -> Machine.Action {
        switch random.next() % 4 {
        case 0: machine.endsUnsent(deadLetter: random.next() % 2 == 0)
        default: machine.attempt(gate(&random))
        }
    }

    static func gate(_ random: inout SplitMix) -> Gate {
        Gate(
            leaseActive: random.next() % 10 != 0, throttled: random.next() % 5 == 0 ? .milliseconds(5) : nil,
            expired: random.next() % 6 == 0)
    }
}
