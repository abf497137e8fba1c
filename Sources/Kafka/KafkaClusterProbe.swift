import Dispatch
import Logging
import Threading

/// A topic as the cluster's metadata describes it.
package struct KafkaTopicDescription: Sendable, Hashable {
    package let name: String
    package let partitions: Int
    /// The fewest replicas any of its partitions has.
    package let replicationFactor: Int

    package init(name: String, partitions: Int, replicationFactor: Int) {
        self.name = name
        self.partitions = partitions
        self.replicationFactor = replicationFactor
    }
}

/// The cluster did not answer: the request's own error, and what the client met while trying
/// (a refused connection, a TLS handshake, a SASL login), most telling first.
package struct KafkaClusterUnanswered: Error, Sendable, CustomStringConvertible {
    package let error: KafkaError
    package let connectionErrors: [KafkaError]

    /// The error that says why: a login or a TLS handshake refused before a connection refused,
    /// before the request's own time-out.
    package var cause: KafkaError { connectionErrors.first ?? error }

    /// The client could not log in or finish a TLS handshake: waiting longer does not help.
    package var isRefusal: Bool { connectionErrors.first.map(Self.isRefusal) ?? false }

    /// Every broker is down because nothing listens where they are said to be (each connection
    /// refused at once, or the name does not resolve): a one-shot check says so at once rather than
    /// waiting out its time-out for a broker that is not there.
    package var nothingListens: Bool {
        guard connectionErrors.contains(where: { $0.code == Code.allBrokersDown }) else { return false }
        let causes = connectionErrors.filter { $0.code != Code.allBrokersDown }
        return !causes.isEmpty
            && causes.allSatisfy {
                $0.message.contains("Connection refused") || $0.message.contains("Failed to resolve")
            }
    }

    /// What stood in the way, by librdkafka's error code.
    package enum Obstacle: Sendable {
        /// A SASL login was refused.
        case login
        /// A TLS handshake failed (the broker's certificate, its name, or a client certificate).
        case tls
        /// No connection, or no answer on one.
        case connection
    }

    package var obstacle: Obstacle {
        if cause.code == Code.authentication { return .login }
        if cause.code == Code.ssl || Self.mentionsTLS(cause.message) { return .tls }
        return .connection
    }

    /// librdkafka names the step that noticed a failed handshake: a certificate the client does not
    /// trust can come as `_SSL` or, a run in a few, as `_TRANSPORT` with OpenSSL's words.
    static func mentionsTLS(_ message: String) -> Bool {
        ["SSL handshake failed", "certificate verify failed", "certificate required", "alert handshake failure"]
            .contains { message.contains($0) }
    }

    package var description: String { cause.message }

    static func isRefusal(_ error: KafkaError) -> Bool {
        error.code == Code.authentication || error.code == Code.ssl || mentionsTLS(error.message)
    }

    /// Refusals first, then the rest in the order met.
    static func ranked(_ errors: [KafkaError]) -> [KafkaError] {
        errors.filter(isRefusal) + errors.filter { !isRefusal($0) }
    }

    typealias Code = KafkaError.Code
}

/// A short-lived client that looks at a cluster before anything runs against it (`apns-worker
/// check`): which topics exist and how they are replicated, what some of their settings are, and,
/// when the cluster does not answer, why. Joins no group, reads and writes no record.
package final class KafkaClusterProbe: Sendable {
    private let client: RDKafkaClient
    private let errors: Locked<[KafkaError]>
    private let queue = DispatchQueue(label: "kafka.probe")

    /// A client with the consumer's settings (its connection, TLS and SASL properties).
    package init(configuration: KafkaConsumerConfiguration, logger: Logger) throws(KafkaError) {
        let errors = Locked<[KafkaError]>([])
        let callbacks = RDKafkaCallbacks(
            logger: logger,
            error: { error in
                errors.withLock { seen in
                    if seen.count < 16, !seen.contains(where: { $0.code == error.code && $0.message == error.message })
                    {
                        seen.append(error)
                    }
                }
            })
        let config = try RDKafkaConfig(properties: configuration.librdkafkaProperties)
        self.client = try RDKafkaClient(.consumer, config: config, callbacks: callbacks)
        self.errors = errors
    }

    /// Every topic the cluster has, with partitions and replication factor. Asks again every half
    /// second until `timeout`, and gives up early once the client's login or TLS handshake was
    /// refused (that does not heal by waiting), or once every broker refused the connection or did
    /// not resolve (`nothingListens`).
    package func topics(timeout: Duration) async -> Result<[String: KafkaTopicDescription], KafkaClusterUnanswered> {
        let (client, errors) = (self.client, self.errors)
        return await withCheckedContinuation { continuation in
            queue.async {
                let clock = ContinuousClock()
                let deadline = clock.now.advanced(by: timeout)
                var last = KafkaError(code: .timedOut, message: "no answer")
                while true {
                    let remaining = clock.now.duration(to: deadline)
                    do throws(KafkaError) {
                        let topics = try client.topicDescriptions(
                            timeout: max(min(remaining, .milliseconds(500)), .milliseconds(1)))
                        continuation.resume(returning: .success(topics))
                        return
                    } catch {
                        last = error
                    }
                    client.serveCallbacks()
                    let seen = KafkaClusterUnanswered.ranked(errors.withLock { $0 })
                    let unanswered = KafkaClusterUnanswered(error: last, connectionErrors: seen)
                    if unanswered.isRefusal || unanswered.nothingListens || clock.now >= deadline {
                        continuation.resume(returning: .failure(unanswered))
                        return
                    }
                }
            }
        }
    }

    /// The settings called `names` of each topic (DescribeConfigs). Throws when the cluster does not
    /// answer it at all (librdkafka's mock cluster does not implement it); a topic it answered with
    /// an error maps to that error.
    package func configs(
        of topics: [String], names: Set<String>, timeout: Duration
    ) async throws(KafkaError) -> [String: Result<[String: String], KafkaError>] {
        let client = self.client
        let result: Result<[String: Result<[String: String], KafkaError>], KafkaError> =
            await withCheckedContinuation { continuation in
                queue.async {
                    continuation.resume(
                        returning: Result { () throws(KafkaError) in
                            try client.topicConfigs(topics, names: names, timeout: timeout)
                        })
                }
            }
        return try result.get()
    }
}
