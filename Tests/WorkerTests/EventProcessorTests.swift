import APNs
import Foundation
import JSONSchema
import Kafka
import Logging
import NIOConcurrencyHelpers
import TestPeers
import Testing

@testable import Worker

/// The event processor on its own: a scripted APNs and a hand-driven scheduler, so retries,
/// throttles and abandonment are checked step by step, without a network or a sleep.
@Suite("Event processor: one result per event, retries as the outcome table says")
struct EventProcessorTests {
    /// Answers from a script, one per request, and records what was sent.
    final class ScriptedSender: NotificationSending {
        private let script: NIOLockedValueBox<[SendAttempt]>
        let sent = NIOLockedValueBox<[String]>([])

        init(_ answers: [SendAttempt]) { script = NIOLockedValueBox(answers) }

        func send(_ requests: [NotificationRequest]) {
            for request in requests {
                sent.withLockedValue { $0.append(request.push.recipientKey) }
                let answer = script.withLockedValue { $0.isEmpty ? nil : $0.removeFirst() }
                request.completion(answer ?? Self.answer(200))
            }
        }

        func shutdown() async {}

        static func answer(_ status: Int, _ reason: APNsReason? = nil, timestamp: Int64? = nil) -> SendAttempt {
            let response = APNsResponse(
                status: status, apnsID: "00000000-0000-0000-0000-00000000000\(status % 10)", reason: reason,
                timestampMilliseconds: timestamp)
            return SendAttempt(
                response: response, error: nil, outcome: .classify(response), credential: "main", duration: .zero)
        }

        static func failure(_ error: APNsClientError) -> SendAttempt {
            SendAttempt(response: nil, error: error, outcome: .classify(error), credential: "main", duration: .zero)
        }
    }

    /// Keeps every delayed work item until the test runs it, and keeps the time: running an item
    /// moves the clock to when it was due, so throttles expire as they would.
    final class ManualScheduler: DelayScheduling {
        let waiting = NIOLockedValueBox<
            [(due: ContinuousClock.Instant, delay: Duration, lease: ObjectIdentifier?, work: @Sendable (Bool) -> Void)]
        >([])
        private let clock = NIOLockedValueBox(ContinuousClock.now)

        var now: ContinuousClock.Instant { clock.withLockedValue { $0 } }

        func after(_ delay: Duration, lease: PartitionLease?, _ work: @escaping @Sendable (Bool) -> Void) {
            let due = now + delay
            waiting.withLockedValue { $0.append((due, delay, lease.map(ObjectIdentifier.init), work)) }
        }

        func cancel(lease: PartitionLease) {
            let owner = ObjectIdentifier(lease)
            let cancelled = waiting.withLockedValue { waiting in
                let matching = waiting.filter { $0.lease == owner }
                waiting.removeAll { $0.lease == owner }
                return matching
            }
            for item in cancelled { item.work(true) }
        }

        var delays: [Duration] { waiting.withLockedValue { $0.map(\.delay) } }

        /// Runs the oldest waiting item (as fired, or as cancelled); false when none waits.
        @discardableResult
        func runNext(cancelled: Bool = false) -> Bool {
            guard let item = waiting.withLockedValue({ $0.isEmpty ? nil : $0.removeFirst() }) else { return false }
            if !cancelled { clock.withLockedValue { $0 = max($0, item.due) } }
            item.work(cancelled)
            return true
        }
    }

    /// Results as they arrive (`nil`: abandoned).
    final class Results: Sendable {
        private let all = NIOLockedValueBox<[EventResult?]>([])
        var values: [EventResult?] { all.withLockedValue { $0 } }
        var count: Int { values.count }
        func append(_ result: EventResult?) { all.withLockedValue { $0.append(result) } }
        /// The one result (itself `nil` if abandoned), or `nil` unless exactly one arrived.
        var only: EventResult?? {
            let values = values
            return values.count == 1 ? values[0] : nil
        }
    }

    static func processor(
        _ sender: ScriptedSender, _ scheduler: ManualScheduler, policy: RetryPolicy = RetryPolicy(),
        now: @escaping @Sendable () -> Date = Date.init
    ) -> EventProcessor {
        EventProcessor(
            decoder: .standard, sender: sender, retryPolicy: policy, scheduler: scheduler,
            observer: NoPipelineObserver(), logger: Logger(label: "test"), now: now, instant: { scheduler.now })
    }

    static func record(_ value: [UInt8]?, offset: Int64 = 0) -> KafkaConsumerMessage {
        KafkaConsumerMessage(topic: "events", partition: 0, offset: offset, key: nil, value: value, headers: [])
    }

    static let valid = EventFixtures.event(["expiration": nil])

    @Test("a delivered event ends at once with one attempt, status 200 and no dead letter")
    func aDeliveredEventEndsAtOnceWithOneAttempt() throws {
        let sender = ScriptedSender([ScriptedSender.answer(200)])
        let scheduler = ManualScheduler()
        let results = Results()
        Self.processor(sender, scheduler).process(Self.record(Self.valid)) { results.append($0) }
        let result = try #require(results.only ?? nil)
        #expect(result.outcome == .delivered)
        #expect(result.attempts == 1)
        #expect(result.status == 200)
        #expect(result.reason == nil)
        #expect(result.deadLetter == nil)
        #expect(result.eventID == "5B0E9A4C-7F2D-4C1E-9A57-0D6C1F4E8B21")
        #expect(scheduler.delays.isEmpty)
    }

    @Test("a credential APNs refuses is named in the log line and its metadata, so an operator knows which app")
    func refusalNamesTheCredential() throws {
        let sender = ScriptedSender([ScriptedSender.answer(403, .invalidProviderToken)])
        let scheduler = ManualScheduler()
        let log = CapturedLog()
        let processor = EventProcessor(
            decoder: .standard, sender: sender, retryPolicy: RetryPolicy(), scheduler: scheduler,
            observer: NoPipelineObserver(), logger: log.logger(), now: Date.init, instant: { scheduler.now })
        let results = Results()
        processor.process(Self.record(Self.valid)) { results.append($0) }
        #expect(try #require(results.only ?? nil).outcome == .failed)
        let entry = try #require(log.all.first { $0.level == .error }, "\(log.lines)")
        #expect(entry.message.contains("credential main"), "\(entry.message)")
        #expect(entry.metadata["credential"] == "main")
    }

    @Test(
        "a request the client refuses before sending (location push, certificate) is rejected with 0 attempts, dead-lettered as no-credential, and its result validates"
    )
    func refusedBeforeSending() throws {
        let refusal = APNsNotificationError(
            .tokenAuthenticationRequired, field: .pushType,
            "push type 'location' supports token-based authentication only")
        let sender = ScriptedSender([
            SendAttempt(
                response: nil, error: refusal, outcome: .classify(refusal), credential: "certificate", duration: .zero)
        ])
        let results = Results()
        Self.processor(sender, ManualScheduler()).process(Self.record(Self.valid)) { results.append($0) }
        let result = try #require(results.only ?? nil)
        #expect(result.outcome == .rejected)
        #expect(result.attempts == 0, "nothing was sent")
        #expect(result.status == nil)
        #expect(result.reason == "tokenAuthenticationRequired")
        #expect(result.deadLetter == .noCredential)
        #expect(result.detail?.hasPrefix("/pushType: ") == true)
        let value = ResultRecord.value(
            for: result, source: Self.record(Self.valid), latency: .zero, completedAt: Date())
        let errors = EventSchemas.resultEvent.validate(try JSONParser.parse(value), mode: .allErrors)
        #expect(errors.isEmpty, "\(errors)")
    }

    @Test("a replayed record's result says how often it was replayed, so downstream keeps the latest word")
    func replayCountInResult() throws {
        let results = Results()
        let record = KafkaConsumerMessage(
            topic: "events", partition: 0, offset: 0, key: nil, value: Self.valid,
            headers: [KafkaHeader(key: "dlq-replay-count", string: "2")])
        Self.processor(ScriptedSender([]), ManualScheduler()).process(record) { results.append($0) }
        let result = try #require(results.only ?? nil)
        #expect(result.replays == 2)
        let text = String(
            decoding: ResultRecord.value(for: result, source: record, latency: .zero, completedAt: Date()),
            as: UTF8.self
        )
        #expect(text.contains(#""replays":2"#))
        let first = String(
            decoding: ResultRecord.value(
                for: EventResult(eventID: "x", outcome: .failed, attempts: 1), source: record, latency: .zero,
                completedAt: Date()), as: UTF8.self)
        #expect(!first.contains("replays"), "absent when never replayed")
    }

    @Test("the first request waits in the caller's batch; its retry after a 503 goes through the sender on its own")
    func theFirstRequestJoinsTheCallersBatchAndRetriesGoThroughTheSender() throws {
        let sender = ScriptedSender([ScriptedSender.answer(503, .serviceUnavailable), ScriptedSender.answer(200)])
        let scheduler = ManualScheduler()
        let results = Results()
        let processor = Self.processor(sender, scheduler)
        var requests: [NotificationRequest] = []
        processor.process(Self.record(Self.valid, offset: 0), lease: PartitionLease(), sending: &requests) {
            results.append($0)
        }
        processor.process(Self.record(Array("{".utf8), offset: 1), lease: PartitionLease(), sending: &requests) {
            results.append($0)
        }
        #expect(requests.count == 1, "the valid event's request waits in the caller's batch")
        #expect(results.values.map { $0?.outcome } == [.invalid], "the invalid one ended at once")
        #expect(sender.sent.withLockedValue { $0.isEmpty }, "nothing sent before the caller sends the batch")
        sender.send(requests)
        #expect(sender.sent.withLockedValue { $0.count } == 1)
        #expect(results.count == 1, "503: waiting for the backoff")
        scheduler.runNext()
        #expect(sender.sent.withLockedValue { $0.count } == 2, "the retry went through the sender on its own")
        let delivered = try #require(results.values.last ?? nil)
        #expect(delivered.outcome == .delivered)
        #expect(delivered.attempts == 2)
    }

    @Test("an invalid event is never sent: it ends at once with 0 attempts and a malformed-JSON dead letter")
    func anInvalidEventIsNeverSent() throws {
        let sender = ScriptedSender([])
        let results = Results()
        Self.processor(sender, ManualScheduler()).process(Self.record(Array("{\"id\": 1,".utf8))) { results.append($0) }
        let result = try #require(results.only ?? nil)
        #expect(result.outcome == .invalid)
        #expect(result.deadLetter == .malformedJSON)
        #expect(result.attempts == 0)
        #expect(sender.sent.withLockedValue { $0.isEmpty })
    }

    @Test("a 503 is retried after a backoff within the ceiling, and delivered on the second attempt")
    func a503IsRetriedAfterABackoffWithinTheCeiling() throws {
        let sender = ScriptedSender([ScriptedSender.answer(503, .serviceUnavailable), ScriptedSender.answer(200)])
        let scheduler = ManualScheduler()
        var policy = RetryPolicy()
        policy.initialBackoff = .milliseconds(200)
        let results = Results()
        Self.processor(sender, scheduler, policy: policy).process(Self.record(Self.valid)) { results.append($0) }
        #expect(results.count == 0, "waiting for the backoff")
        let delay = try #require(scheduler.delays.first)
        #expect(delay >= .zero && delay <= .milliseconds(200))
        scheduler.runNext()
        let result = try #require(results.only ?? nil)
        #expect(result.outcome == .delivered)
        #expect(result.attempts == 2)
        #expect(result.firstFailureAt != nil)
    }

    @Test("a 429 holds back every event for that device token, unsent, until the throttle ends")
    func aTooManyRequestsThrottlesEveryEventForThatToken() throws {
        let sender = ScriptedSender([ScriptedSender.answer(429, .tooManyRequests)])
        let scheduler = ManualScheduler()
        let processor = Self.processor(sender, scheduler)
        let first = Results()
        let second = Results()
        processor.process(Self.record(Self.valid, offset: 0)) { first.append($0) }
        // The first event is throttled; the second for the same token waits too, unsent.
        processor.process(Self.record(Self.valid, offset: 1)) { second.append($0) }
        #expect(sender.sent.withLockedValue { $0.count } == 1)
        #expect(scheduler.delays.count == 2)
        #expect(scheduler.delays.allSatisfy { $0 > .zero })
        scheduler.runNext()
        scheduler.runNext()
        #expect(first.only??.outcome == .delivered)
        #expect(first.only??.attempts == 2)
        #expect(second.only??.outcome == .delivered)
        #expect(second.only??.attempts == 1)
    }

    @Test("retries stop at maxAttempts, and the event fails with a retries-exhausted dead letter")
    func retriesStopAtMaxAttemptsWithADeadLetter() throws {
        var policy = RetryPolicy()
        policy.maxAttempts = 3
        let sender = ScriptedSender(Array(repeating: ScriptedSender.answer(500, .internalServerError), count: 3))
        let scheduler = ManualScheduler()
        let results = Results()
        Self.processor(sender, scheduler, policy: policy).process(Self.record(Self.valid)) { results.append($0) }
        while scheduler.runNext() {}
        let result = try #require(results.only ?? nil)
        #expect(result.outcome == .failed)
        #expect(result.deadLetter == .retriesExhausted)
        #expect(result.attempts == 3)
        #expect(result.detail?.contains("gave up after 3 attempts") == true)
        #expect(sender.sent.withLockedValue { $0.count } == 3)
    }

    @Test("a lost connection is retried, and the event is delivered on the second attempt")
    func aLostConnectionIsRetried() throws {
        let lost = APNsClientError(.connectionLost, "reset", mayHaveReachedAPNs: true)
        let sender = ScriptedSender([ScriptedSender.failure(lost), ScriptedSender.answer(200)])
        let scheduler = ManualScheduler()
        let results = Results()
        Self.processor(sender, scheduler).process(Self.record(Self.valid)) { results.append($0) }
        #expect(scheduler.runNext())
        #expect(results.only??.outcome == .delivered)
        #expect(results.only??.attempts == 2)
    }

    @Test("403 ExpiredProviderToken is retried at once, without a backoff")
    func anExpiredProviderTokenIsRetriedAtOnce() throws {
        let sender = ScriptedSender([ScriptedSender.answer(403, .expiredProviderToken), ScriptedSender.answer(200)])
        let scheduler = ManualScheduler()
        let results = Results()
        Self.processor(sender, scheduler).process(Self.record(Self.valid)) { results.append($0) }
        #expect(scheduler.delays.isEmpty)
        #expect(results.only??.outcome == .delivered)
        #expect(results.only??.attempts == 2)
    }

    // A token APNs finds expired as soon as it is signed (clock skew) was retried with no backoff:
    // 8 requests within milliseconds, then a dead letter.
    @Test("ExpiredProviderToken again and again: the first retry at once, then backoff, not a burst")
    func repeatedExpiredProviderTokenBacksOff() throws {
        let expired = ScriptedSender.answer(403, .expiredProviderToken)
        let sender = ScriptedSender([expired, expired, expired, ScriptedSender.answer(200)])
        let scheduler = ManualScheduler()
        let results = Results()
        Self.processor(sender, scheduler).process(Self.record(Self.valid)) { results.append($0) }
        #expect(sender.sent.withLockedValue { $0.count } == 2, "one immediate retry, then a wait")
        #expect(scheduler.delays.count == 1 && scheduler.delays[0] > .zero)
        #expect(scheduler.runNext())
        #expect(sender.sent.withLockedValue { $0.count } == 3)
        #expect(scheduler.delays.count == 1, "waits again")
        #expect(scheduler.runNext())
        #expect(results.only??.outcome == .delivered)
        #expect(results.only??.attempts == 4)
    }

    @Test("403 InvalidProviderToken fails the event with a credentials dead letter")
    func brokenCredentialsFailWithACredentialsDeadLetter() throws {
        let sender = ScriptedSender([ScriptedSender.answer(403, .invalidProviderToken)])
        let results = Results()
        Self.processor(sender, ManualScheduler()).process(Self.record(Self.valid)) { results.append($0) }
        let result = try #require(results.only ?? nil)
        #expect(result.outcome == .failed)
        #expect(result.deadLetter == .credentials)
        #expect(result.reason == "InvalidProviderToken")
    }

    @Test("410 Unregistered and 400 BadDeviceToken end without a retry; Unregistered keeps APNs's timestamp")
    func unregisteredAndRejectedEndWithoutRetry() throws {
        let sender = ScriptedSender([
            ScriptedSender.answer(410, .unregistered, timestamp: 1_700_000_000_000),
            ScriptedSender.answer(400, .badDeviceToken),
        ])
        let scheduler = ManualScheduler()
        let results = Results()
        let processor = Self.processor(sender, scheduler)
        processor.process(Self.record(Self.valid, offset: 0)) { results.append($0) }
        processor.process(Self.record(Self.valid, offset: 1)) { results.append($0) }
        #expect(scheduler.delays.isEmpty)
        #expect(results.values.map { $0?.outcome } == [.unregistered, .rejected])
        #expect(results.values[0]?.apnsTimestamp == 1_700_000_000_000)
        #expect(results.values[1]?.reason == "BadDeviceToken")
    }

    @Test("an event whose expiration passes while it waits for a retry ends expired")
    func anEventWhoseExpirationPassesWhileWaitingExpires() throws {
        // Expires 5 s after "now"; the backoff is 60 s: APNs would drop it anyway.
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let event = EventFixtures.event(["expiration": .number(JSONNumber(int64: 1_800_000_005))])
        var policy = RetryPolicy()
        policy.initialBackoff = .seconds(60)
        policy.maxBackoff = .seconds(60)
        let sender = ScriptedSender(Array(repeating: ScriptedSender.answer(503, .serviceUnavailable), count: 10))
        let scheduler = ManualScheduler()
        let results = Results()
        Self.processor(sender, scheduler, policy: policy, now: { now }).process(Self.record(event)) {
            results.append($0)
        }
        // Either decided at once (the wait drawn passes the expiration) or after one wait.
        while results.count == 0, scheduler.runNext() {}
        let result = try #require(results.only ?? nil)
        #expect([.expired, .delivered].contains(result.outcome))
        #expect(result.outcome == .expired || result.attempts >= 2)
    }

    @Test("a cancelled scheduler abandons the waiting event: no result, so its offset stays uncommitted")
    func aCancelledSchedulerAbandonsTheWaitingEvent() {
        let sender = ScriptedSender([ScriptedSender.answer(503, .serviceUnavailable)])
        let scheduler = ManualScheduler()
        let results = Results()
        Self.processor(sender, scheduler).process(Self.record(Self.valid)) { results.append($0) }
        scheduler.runNext(cancelled: true)
        #expect(results.count == 1)
        #expect(results.values.first! == nil, "abandoned: no result, the offset stays uncommitted")
    }

    @Test("a partition handed over: its event waiting for a retry is given up at once, never pushed again here")
    func aHandedOverEventIsGivenUp() async throws {
        let sender = ScriptedSender([ScriptedSender.answer(503, .serviceUnavailable)])
        let scheduler = ManualScheduler()
        let results = Results()
        let lease = PartitionLease(KafkaTopicPartition(topic: "events", partition: 0))
        Self.processor(sender, scheduler).process(Self.record(Self.valid), lease: lease) { results.append($0) }
        #expect(scheduler.delays.count == 1, "waiting for its retry")
        lease.handOver()
        scheduler.cancel(lease: lease)
        #expect(results.values.count == 1 && results.values.first! == nil, "given up: no result, uncommitted")
        #expect(sender.sent.withLockedValue { $0.count } == 1, "not pushed again")

        // The event-loop scheduler cancels only that lease's waits.
        let real = EventLoopDelayScheduler()
        let other = PartitionLease(KafkaTopicPartition(topic: "events", partition: 1))
        let fired = NIOLockedValueBox<[String]>([])
        real.after(.seconds(3600), lease: lease) { cancelled in fired.withLockedValue { $0.append("mine \(cancelled)") }
        }
        real.after(.seconds(3600), lease: other) { cancelled in
            fired.withLockedValue { $0.append("other \(cancelled)") }
        }
        real.cancel(lease: lease)
        #expect(fired.withLockedValue { $0 } == ["mine true"])
        #expect(real.pendingCount == 1)
        real.cancelAll()
    }

    @Test("the event-loop scheduler runs work after its delay; after cancelAll, waiting and new work run cancelled")
    func theRealSchedulerRunsWorkAfterItsDelayAndCancelsTheRest() async throws {
        let scheduler = EventLoopDelayScheduler()
        let fired = NIOLockedValueBox<[Bool]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            scheduler.after(.milliseconds(5)) { cancelled in
                fired.withLockedValue { $0.append(cancelled) }
                done.resume()
            }
        }
        scheduler.after(.seconds(3600)) { cancelled in fired.withLockedValue { $0.append(cancelled) } }
        #expect(scheduler.pendingCount == 1)
        scheduler.cancelAll()
        scheduler.after(.seconds(1)) { cancelled in fired.withLockedValue { $0.append(cancelled) } }
        #expect(fired.withLockedValue { $0 } == [false, true, true])
        #expect(scheduler.pendingCount == 0)
    }
}
