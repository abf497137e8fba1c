import Dispatch
import Foundation
import Logging

/// Whether a cluster speaks the next-generation consumer group protocol (KIP-848), found by a short
/// probe join: librdkafka has no call that returns a broker's API versions, and where the group
/// coordinator lacks `ConsumerGroupHeartbeat` (version 1: Apache Kafka 4.0 and later) a member
/// joining under `group.protocol=consumer` gets no error at all, only no partitions.
///
/// The probe is a member of a group of its own (never the worker's), subscribed to one topic, that
/// watches the responses its client receives (an interceptor): an answer to `ConsumerGroupHeartbeat`
/// says the broker speaks the protocol; a coordinator found (`FindCoordinator` answered) and no
/// heartbeat answered within `verdictAfter` says it does not (librdkafka checks the coordinator's
/// API versions before it sends one, so none is ever sent). It reads and commits nothing, and
/// leaves the group when done.
package enum KafkaGroupProtocolProbe {
    package enum Verdict: Sendable, Equatable {
        /// The coordinator answered a `ConsumerGroupHeartbeat`.
        case supported
        /// The coordinator was found and answered other requests, and no heartbeat was sent or answered.
        case unsupported
        /// No coordinator was found within the time allowed (the cluster did not answer enough to say).
        case undecided(String)
    }

    /// The group the probe joins: never the worker's, so the worker's group is not disturbed.
    package static func group(_ consumerGroup: String) -> String { consumerGroup + "-protocol-probe" }

    /// Joins `group(configuration.groupID)` under the next-generation protocol, subscribed to
    /// `topic`, and says what the cluster answered within `timeout`.
    package static func probe(
        _ configuration: KafkaConsumerConfiguration, topic: String, timeout: Duration,
        verdictAfter: Duration = .seconds(5), logger: Logger
    ) async throws(KafkaError) -> Verdict {
        var settings = configuration
        settings.groupID = group(configuration.groupID)
        settings.groupProtocol = .consumer
        for owned in KafkaGroupProtocol.consumer.brokerOwned { settings.properties[owned.property] = nil }
        settings.properties["group.instance.id"] = nil  // a static member's id is the worker's
        settings.autoOffsetReset = .latest  // assigned partitions fetch from their end: no backlog read
        settings.properties["auto.offset.reset"] = nil
        settings.stallBound = nil
        // What a running member watches too (`KafkaConsumer`), with the probe's own bound.
        let watch = HeartbeatWatch(bound: verdictAfter)
        let callbacks = RDKafkaCallbacks(
            logger: logger, responses: { apiKey, error in watch.response(apiKey: apiKey, error: error) })
        let config = try RDKafkaConfig(properties: settings.librdkafkaProperties)
        let client = try RDKafkaClient(.consumer, config: config, callbacks: callbacks)
        try client.consumer.subscribe([topic])
        return await withCheckedContinuation { continuation in
            DispatchQueue(label: "kafka.protocol-probe").async {
                let deadline = ContinuousClock.now + timeout
                var verdict = Verdict.undecided("no group coordinator was found within \(timeout)")
                var names = TopicNames()
                while ContinuousClock.now < deadline {
                    // Serves the group's events; a record (the probe is assigned partitions) is dropped unread.
                    _ = client.consumer.poll(timeoutMilliseconds: 50, topicNames: &names)
                    if watch.answered {
                        verdict = .supported
                        break
                    }
                    if watch.due() {
                        verdict = .unsupported
                        break
                    }
                }
                _ = client.consumer.close()
                continuation.resume(returning: verdict)
            }
        }
    }
}
