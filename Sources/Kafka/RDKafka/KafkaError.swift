internal import CRdKafka

/// An error from Kafka or from librdkafka itself: librdkafka's error code, its message, and what the
/// caller can do about it.
package struct KafkaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// librdkafka's `rd_kafka_resp_err_t`: negative values are client-side (`-1xx`), positive ones come
    /// from the broker's protocol.
    package struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        package let rawValue: Int32
        package init(rawValue: Int32) { self.rawValue = rawValue }

        /// librdkafka's symbolic name, e.g. `_MSG_TIMED_OUT` or `NOT_LEADER_FOR_PARTITION`.
        package var name: String { String(cString: rd_kafka_err2name(rd_kafka_resp_err_t(rawValue))) }
        package var description: String { "\(name) (\(rawValue))" }

        package static let invalidArgument = Code(RD_KAFKA_RESP_ERR__INVALID_ARG)
        package static let unknownTopicOrPartition = Code(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        package static let notLeaderForPartition = Code(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION)
        package static let requestTimedOut = Code(RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT)
        package static let messageTimedOut = Code(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
        package static let queueFull = Code(RD_KAFKA_RESP_ERR__QUEUE_FULL)
        package static let purged = Code(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
        package static let purgedInFlight = Code(RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
        package static let transport = Code(RD_KAFKA_RESP_ERR__TRANSPORT)
        package static let allBrokersDown = Code(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        package static let timedOut = Code(RD_KAFKA_RESP_ERR__TIMED_OUT)
        package static let fatal = Code(RD_KAFKA_RESP_ERR__FATAL)
        package static let state = Code(RD_KAFKA_RESP_ERR__STATE)
        package static let destroyed = Code(RD_KAFKA_RESP_ERR__DESTROY)
        package static let notCoordinator = Code(RD_KAFKA_RESP_ERR_NOT_COORDINATOR)
        package static let coordinatorNotAvailable = Code(RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE)
        package static let rebalanceInProgress = Code(RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS)
        package static let offsetMetadataTooLarge = Code(RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE)
        package static let notEnoughReplicas = Code(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS)
        package static let illegalGeneration = Code(RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION)
        package static let unknownMemberID = Code(RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID)
        package static let noOffset = Code(RD_KAFKA_RESP_ERR__NO_OFFSET)
        package static let messageSizeTooLarge = Code(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        package static let recordListTooLarge = Code(RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE)
        package static let invalidRecord = Code(RD_KAFKA_RESP_ERR_INVALID_RECORD)
        package static let topicException = Code(RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION)
        package static let topicAuthorizationFailed = Code(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
        package static let clusterAuthorizationFailed = Code(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED)
        package static let groupAuthorizationFailed = Code(RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED)
        package static let unknownTopic = Code(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
        package static let unknownPartition = Code(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
        package static let authentication = Code(RD_KAFKA_RESP_ERR__AUTHENTICATION)
        package static let ssl = Code(RD_KAFKA_RESP_ERR__SSL)
        package static let unsupportedFeature = Code(RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE)

        init(_ err: rd_kafka_resp_err_t) { self.rawValue = err.rawValue }
    }

    package let code: Code
    /// librdkafka's own explanation, or ours where the error is found on this side.
    package let message: String
    /// The configuration property at fault, for configuration errors.
    package let property: String?
    /// The client's state is unusable: an idempotent producer lost its guarantees, the consumer was
    /// fenced. Only a new client recovers.
    package let isFatal: Bool
    /// Trying the same operation again may succeed.
    package let isRetriable: Bool

    package init(code: Code, message: String, property: String? = nil, isFatal: Bool = false, isRetriable: Bool? = nil)
    {
        self.code = code
        self.message = message
        self.property = property
        self.isFatal = isFatal || code == .fatal
        self.isRetriable = isRetriable ?? Self.retriableCodes.contains(code)
    }

    init(_ err: rd_kafka_resp_err_t, _ message: String? = nil) {
        let code = Code(err)
        self.init(code: code, message: message ?? String(cString: rd_kafka_err2str(err)))
    }

    /// Takes ownership of an `rd_kafka_error_t` and frees it.
    init(consuming error: OpaquePointer) {
        defer { rd_kafka_error_destroy(error) }
        self.init(
            code: Code(rd_kafka_error_code(error)),
            message: String(cString: rd_kafka_error_string(error)),
            isFatal: rd_kafka_error_is_fatal(error) != 0,
            isRetriable: rd_kafka_error_is_retriable(error) != 0)
    }

    /// Codes that describe a passing condition: a broker away, a leader moving, a full local queue.
    private static let retriableCodes: Set<Code> = [
        .notLeaderForPartition, .requestTimedOut, .messageTimedOut, .queueFull, .transport, .allBrokersDown,
        .timedOut, .notCoordinator, .coordinatorNotAvailable, .rebalanceInProgress,
    ]

    /// How far a failure to produce a record reaches, for a producer that must decide whether
    /// trying the same record again can ever succeed.
    package enum ProduceFailureScope: Sendable, Hashable {
        /// A passing condition (a broker away, a leader moving, a time-out): the same record again.
        case transient
        /// This record as it is will never be stored (too large, refused by the topic's rules); a
        /// different record to the same topic may be.
        case record
        /// Nothing can be stored in this topic until someone acts (no such topic, not authorized).
        case topic
        /// The producer is unusable (an idempotent producer lost its guarantees): only a new one recovers.
        case fatal
    }

    /// The broker refused the principal (ACLs): no retry helps until someone grants access.
    package var isAuthorizationFailure: Bool {
        [.topicAuthorizationFailed, .clusterAuthorizationFailed, .groupAuthorizationFailed].contains(code)
    }

    /// The errors that refuse one record as it is (`ProduceFailureScope.record`): a smaller form
    /// of it may be taken.
    package static let recordRefusals: [Code] = [.messageSizeTooLarge, .recordListTooLarge, .invalidRecord]

    /// What this error means for the record whose production it failed.
    package var produceFailureScope: ProduceFailureScope {
        if isFatal { return .fatal }
        if Self.recordRefusals.contains(code) { return .record }
        switch code {
        case .topicException, .topicAuthorizationFailed, .clusterAuthorizationFailed, .unknownTopic,
            .unknownPartition, .unknownTopicOrPartition:
            return .topic
        default: return .transient
        }
    }

    package var description: String {
        var text = "Kafka error \(code.name): \(message)"
        if let property { text += " [property \(property)]" }
        if isFatal { text += " (fatal)" }
        return text
    }

    static func invalidConfiguration(_ property: String, _ message: String) -> KafkaError {
        KafkaError(code: .invalidArgument, message: message, property: property)
    }
}
