import Foundation
import Kafka
import Logging
import Threading

/// Does the broker give commit metadata back? The worker keeps the done records above a waiting
/// event in its commits' metadata; a broker that drops it (Tansu 0.6) needs `delivery.progressTopic`,
/// or a crash or a hand-over pushes those events again. `check` and every pipeline at start find out
/// the same way: a commit of offset 0 of one input partition, with `text` as its metadata, as the
/// group `<consumer.group>-probe`, read back.
///
/// The probe never touches the worker's own group, and its metadata is a text no worker reads as done
/// records (`CommitMetadata` refuses it as not its own): even a probe that landed in a worker's group
/// could make no worker skip an event. Kafka forgets the probe group after `offsets.retention.minutes`
/// (7 days by default). With ACLs, the worker's principal needs Read on that group (a prefixed ACL on
/// `consumer.group` covers it, and replay's groups).
///
/// One client for the whole wait: a commit to a broker that does not answer cannot be cancelled
/// (librdkafka's synchronous commit waits for a coordinator), so a probe asked again while its commit
/// still waits waits for that same commit rather than starting another.
package final class CommitMetadataProbe: Sendable {
    package static let text = "apns-worker: a probe of commit metadata, not done records"

    package static func group(_ consumerGroup: String) -> String { consumerGroup + "-probe" }

    /// Why a worker without `delivery.progressTopic` does not start on a broker that drops commit
    /// metadata, and what to do.
    package static let refusal =
        "the broker drops commit metadata and delivery.progressTopic is not set: after a crash or a hand-over, the notifications that finished above one still waiting would be pushed again; create a topic for the done records (as docs/deployment.md does: kafka-topics.sh --create --topic apns-worker-progress --partitions 3 --config cleanup.policy=compact,delete --config retention.ms=86400000) and set delivery.progressTopic to its name (docs/deployment.md, \"Done records on a broker that drops commit metadata\")"

    /// What to do when the probe itself was refused or not answered.
    package static func advice(for error: any Error, progressTopic: String?) -> String {
        guard let error = error as? KafkaError, error.isAuthorizationFailure else {
            return "run asks again at start until the broker answers"
        }
        return progressTopic == nil
            ? "run refuses to start until it can probe: grant the worker's principal Read on this group (a prefixed ACL on consumer.group covers it), or set delivery.progressTopic"
            : "run then keeps done records in delivery.progressTopic as well"
    }

    private let prober: KafkaConsumer
    private let partition: KafkaTopicPartition
    /// The commit and its read-back under way, or finished with its answer.
    private let attempt: Locked<Task<Bool, any Error>?>

    /// - Parameter onError: what librdkafka reports while it cannot reach the broker (TLS, SASL,
    ///   unreachable), for readiness to say.
    package init(
        _ consumer: KafkaConsumerConfiguration, partition: KafkaTopicPartition, logger: Logger,
        onError: (@Sendable (KafkaError) -> Void)? = nil
    ) throws {
        var settings = consumer
        settings.groupID = Self.group(consumer.groupID)
        settings.stallBound = nil
        // Never a member (it commits without joining): the classic protocol's commit outside a group's
        // generation is what it needs, whatever protocol the worker's group speaks.
        settings.groupProtocol = .classic
        settings.properties["group.instance.id"] = nil  // never a member: a static member's id is the worker's
        prober = try KafkaConsumer(configuration: settings, errorHandler: onError, logger: logger)
        self.partition = partition
        attempt = Locked(nil)
    }

    /// True when the broker gave the probe's metadata back, false when it dropped it, the error it
    /// answered instead, or `nil` when it has not answered within `wait` (the commit goes on; ask
    /// again). A failed attempt is made again at the next call.
    package func answer(within wait: Duration) async -> Result<Bool, any Error>? {
        let task = attempt.withLock { attempt in
            if let current = attempt { return current }
            let (prober, partition) = (self.prober, self.partition)
            let task = Task {
                try await prober.commit([KafkaTopicPartitionOffset(partition, offset: 0, metadata: Self.text)])
                return try await prober.committed([partition])[partition]?.metadata == Self.text
            }
            attempt = task
            return task
        }
        let answer = await ResumeOnce<Result<Bool, any Error>?>.first(
            of: { await task.result }, orAfter: wait, timedOut: nil)
        if case .failure = answer { attempt.withLock { $0 = nil } }
        return answer
    }

    /// Once, for `check`: the answer within `timeout`, or a time-out error.
    package static func keepsMetadata(
        _ consumer: KafkaConsumerConfiguration, partition: KafkaTopicPartition, timeout: Duration, logger: Logger
    ) async throws -> Bool {
        let probe = try CommitMetadataProbe(consumer, partition: partition, logger: logger)
        let answer = await probe.answer(within: timeout)
        // Closed before `check` goes on: a client left closing in the background still had its
        // threads when the process exited, and they met OpenSSL's clean-up at exit (a crash).
        await probe.closed(within: timeout)
        guard let answer else {
            throw KafkaError(code: .timedOut, message: "the probe commit was not answered within \(timeout)")
        }
        return try answer.get()
    }

    /// Closes the client and waits for it, at most `wait` (a commit still waiting keeps it).
    func closed(within wait: Duration) async {
        let prober = self.prober
        await ResumeOnce<Void>.first(of: { await prober.close() }, orAfter: wait, timedOut: ())
    }

    /// Closes the client (in the background: a commit still waiting keeps it until it returns).
    package func close() {
        let prober = self.prober
        Task { await prober.close() }
    }
}
