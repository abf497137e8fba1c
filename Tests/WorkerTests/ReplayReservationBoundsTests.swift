import Foundation
import Kafka
import Testing

@testable import Worker

/// A replay reservation read back is trusted only as far as a run could have written it: an expiry no
/// further ahead than a reservation lasts, a holder id of the form runs use. And a run stops producing once
/// its own reservation may have lapsed, and its stall watchdog does not count a checkpoint as a stall.
@Suite("Replay holds: bounded", .serialized, .timeLimit(.minutes(3)))
struct ReplayReservationBoundsTests {
    /// Commits `reservation` on the credentials cursor of the replayer's dead-letter partition 0.
    static func plant(_ reservation: CommitMetadata.Reservation, cluster: KafkaMockCluster) async throws {
        let group = DeadLetterReplayer.cursorGroup("r", .credentials)
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(bootstrapServers: cluster.bootstrapServers, groupID: group))
        let text = CommitMetadata(committed: 0, reservation: reservation).encoded().text
        try await consumer.commit([
            KafkaTopicPartitionOffset(KafkaTopicPartition(topic: "dlq", partition: 0), offset: 0, metadata: text)
        ])
        await consumer.close()
    }

    @Test("a reservation that expires far beyond what a run writes does not block replay until someone edits the group")
    func farExpiryIsIgnored() async throws {
        let (cluster, replayer) = try await ReplayRunTests.deadLetterTopic(reasons: ["credentials", "credentials"])
        try await Self.plant(CommitMetadata.Reservation(holder: "stuck-run", expires: Int64.max - 1), cluster: cluster)
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials]
        let report = try await replayer.run(request)
        #expect(report.count(.replayed) == 2, "\(report.table)")
        #expect(report.notes.contains { $0.contains("expiry") }, "\(report.notes)")
    }

    @Test("a holder that no run could have written is ignored, and never reaches a message whole")
    func oddHolderIsIgnored() async throws {
        let (cluster, replayer) = try await ReplayRunTests.deadLetterTopic(reasons: ["credentials"])
        let holder = String(repeating: "x", count: 5_000) + "\u{1b}[31m"
        let soon = Int64((Date().timeIntervalSince1970 + 30) * 1000)
        try await Self.plant(CommitMetadata.Reservation(holder: holder, expires: soon), cluster: cluster)
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials]
        do {
            let report = try await replayer.run(request)
            #expect(report.count(.replayed) == 1, "\(report.table)")
            #expect(report.notes.allSatisfy { $0.count < 500 }, "\(report.notes.map(\.count))")
        } catch {
            Issue.record("refused by a holder no run writes (\("\(error)".count) characters)")
        }
    }

    // The watchdog that fails a run whose topic stops delivering counted a checkpoint's flush and
    // cursor stores (several Kafka round trips) as silence from the topic.
    @Test("a checkpoint slower than the stall time-out does not fail the run")
    func slowCheckpointIsNotAStall() async throws {
        let (cluster, plain) = try await ReplayRunTests.deadLetterTopic(
            reasons: ["credentials", "credentials", "no-credential", "retries-exhausted"])
        try cluster.setRoundTripTime(broker: 1, .milliseconds(500))
        var replayer = plain
        replayer.stallTimeout = .seconds(2)  // a checkpoint of three reasons takes several round trips
        replayer.checkpointInterval = 10_000
        var request = ReplayRequest(deadLetterTopic: "dlq")
        request.reasons = [.credentials, .noCredential, .retriesExhausted]
        let report = try await replayer.run(request)
        #expect(report.count(.replayed) == 4, "\(report.table)")
    }
}
