import CRdKafka

/// An error from Kafka or from librdkafka itself: librdkafka's error code, its message, and what the
/// caller can do about it.
public struct KafkaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// librdkafka's `rd_kafka_resp_err_t`: negative values are client-side (`-1xx`), positive ones come
    /// from the broker's protocol.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// librdkafka's symbolic name, e.g. `_MSG_TIMED_OUT` or `NOT_LEADER_FOR_PARTITION`.
        public var name: String { String(cString: rd_kafka_err2name(rd_kafka_resp_err_t(rawValue))) }
        public var description: String { "\(name) (\(rawValue))" }

        public static let invalidArgument = Code(RD_KAFKA_RESP_ERR__INVALID_ARG)
        public static let unknownTopicOrPartition = Code(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        public static let notLeaderForPartition = Code(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION)
        public static let requestTimedOut = Code(RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT)
        public static let messageTimedOut = Code(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
        public static let queueFull = Code(RD_KAFKA_RESP_ERR__QUEUE_FULL)
        public static let purged = Code(RD_KAFKA_RESP_ERR__PURGE_QUEUE)
        public static let purgedInFlight = Code(RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
        public static let transport = Code(RD_KAFKA_RESP_ERR__TRANSPORT)
        public static let allBrokersDown = Code(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        public static let timedOut = Code(RD_KAFKA_RESP_ERR__TIMED_OUT)
        public static let fatal = Code(RD_KAFKA_RESP_ERR__FATAL)
        public static let state = Code(RD_KAFKA_RESP_ERR__STATE)
        public static let destroyed = Code(RD_KAFKA_RESP_ERR__DESTROY)
        public static let notCoordinator = Code(RD_KAFKA_RESP_ERR_NOT_COORDINATOR)
        public static let coordinatorNotAvailable = Code(RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE)
        public static let rebalanceInProgress = Code(RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS)
        public static let illegalGeneration = Code(RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION)
        public static let unknownMemberID = Code(RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID)
        public static let noOffset = Code(RD_KAFKA_RESP_ERR__NO_OFFSET)
        public static let messageSizeTooLarge = Code(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        public static let recordListTooLarge = Code(RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE)
        public static let invalidRecord = Code(RD_KAFKA_RESP_ERR_INVALID_RECORD)
        public static let topicException = Code(RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION)
        public static let topicAuthorizationFailed = Code(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED)
        public static let clusterAuthorizationFailed = Code(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED)
        public static let unknownTopic = Code(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
        public static let unknownPartition = Code(RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)

        init(_ err: rd_kafka_resp_err_t) { self.rawValue = err.rawValue }
    }

    public let code: Code
    /// librdkafka's own explanation, or ours where the error is found on this side.
    public let message: String
    /// The configuration property at fault, for configuration errors.
    public let property: String?
    /// The client's state is unusable: an idempotent producer lost its guarantees, the consumer was
    /// fenced. Only a new client recovers.
    public let isFatal: Bool
    /// Trying the same operation again may succeed.
    public let isRetriable: Bool

    public init(code: Code, message: String, property: String? = nil, isFatal: Bool = false, isRetriable: Bool? = nil) {
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
    public enum ProduceFailureScope: Sendable, Hashable {
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

    /// What this error means for the record whose production it failed.
    public var produceFailureScope: ProduceFailureScope {
        if isFatal { return .fatal }
        switch code {
        case .messageSizeTooLarge, .recordListTooLarge, .invalidRecord: return .record
        case .topicException, .topicAuthorizationFailed, .clusterAuthorizationFailed, .unknownTopic,
            .unknownPartition, .unknownTopicOrPartition:
            return .topic
        default: return .transient
        }
    }

    public var description: String {
        var text = "Kafka error \(code.name): \(message)"
        if let property { text += " [property \(property)]" }
        if isFatal { text += " (fatal)" }
        return text
    }

    static func invalidConfiguration(_ property: String, _ message: String) -> KafkaError {
        KafkaError(code: .invalidArgument, message: message, property: property)
    }
}
