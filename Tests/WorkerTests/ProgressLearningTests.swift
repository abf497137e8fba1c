import Kafka
import Testing

@testable import Worker

/// What an assignment starts from when its budget passes before every answer is in.
@Suite("Progress learning: each partition's answer that came in time counts")
struct ProgressLearningTests {
    let partitions = (Int32(0)..<3).map { KafkaTopicPartition(topic: "events", partition: $0) }

    /// Three partitions committed at 10 with 12 to 19 done, and owed progress on the second.
    var starting: StartingProgress {
        let known = KnownProgress(committed: 10, done: OffsetRanges([12..<20]))
        let owed = OwedProgress(
            candidate: CommitCandidate(partition: partitions[1], offset: 11, done: OffsetRanges([20..<25]), version: 1),
            start: 0)
        return StartingProgress(
            partitions: partitions, committed: Dictionary(uniqueKeysWithValues: partitions.map { ($0, 10) }),
            read: Dictionary(uniqueKeysWithValues: partitions.map { ($0, known) }), owed: [partitions[1]: owed],
            bounds: DoneRecordBounds(maxInFlight: 10, maxParked: nil))
    }

    @Test("past the budget, only the partition whose end has not come starts without its done records")
    func slowPartitionAlone() throws {
        var learning = ProgressLearning()
        learning.read(starting)
        learning.learned(end: 30, of: partitions[0])
        learning.learned(end: 30, of: partitions[1])
        let answer = learning.give()
        guard case .decided(let decision) = try #require(answer) else {
            Issue.record("the committed offsets were read: a decision is due")
            return
        }
        #expect(decision.progress[partitions[0]]?.done == OffsetRanges([12..<20]))
        #expect(decision.progress[partitions[1]]?.done == OffsetRanges([10..<11, 12..<25]), "owed kept where answered")
        #expect(decision.progress[partitions[2]] == KnownProgress(committed: 10, done: OffsetRanges()))
        #expect(decision.unchecked == [partitions[2]])
        let again = learning.give()
        #expect(again == nil, "given once")
        learning.learned(end: 30, of: partitions[2])
        let late = learning.give()
        #expect(late == nil, "an answer after the budget changes nothing")
    }

    @Test("past the budget before the committed offsets were read: nothing is known done")
    func unread() {
        var learning = ProgressLearning()
        let answer = learning.give()
        #expect(answer == .unread)
        learning.read(starting)
        let again = learning.give()
        #expect(again == nil)
    }

    @Test("every end in: each partition checked, none unchecked")
    func everyEnd() throws {
        var learning = ProgressLearning()
        learning.read(starting)
        for partition in partitions { learning.learned(end: 22, of: partition) }
        let answer = learning.give()
        guard case .decided(let decision) = try #require(answer) else {
            Issue.record("the committed offsets were read: a decision is due")
            return
        }
        #expect(decision.unchecked.isEmpty)
        #expect(decision.refused.map(\.owed) == [true], "the owed records reach past the end at 22")
        #expect(decision.progress[partitions[1]]?.done == OffsetRanges([12..<20]))
    }
}
