import Threading

/// Under the next-generation group protocol, notices a group coordinator that never answers
/// `ConsumerGroupHeartbeat`: librdkafka checks the coordinator's API versions before it sends one,
/// and where the broker lacks it (before Apache Kafka 4.0) it raises no error at all; it marks the
/// coordinator dead and looks it up again, for ever, and the member never gets a partition. Fed
/// every response the client receives (`RDKafkaCallbacks.responses`) and asked by the poll loop;
/// says so once, `bound` after a coordinator was found when no heartbeat has been answered.
final class HeartbeatWatch: Sendable {
    private struct State {
        var coordinatorFound: ContinuousClock.Instant?
        var answered = false
        var reported = false
    }

    static let findCoordinator: Int16 = 10
    static let consumerGroupHeartbeat: Int16 = 68

    private let state = Locked(State())
    private let bound: Duration

    init(bound: Duration) { self.bound = bound }

    /// One response the client received (on a broker thread).
    func response(apiKey: Int16, error: KafkaError.Code, now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            if apiKey == Self.consumerGroupHeartbeat { state.answered = true }
            if apiKey == Self.findCoordinator, error.rawValue == 0, state.coordinatorFound == nil {
                state.coordinatorFound = now
            }
        }
    }

    /// A heartbeat has been answered: the coordinator speaks the protocol.
    var answered: Bool { state.withLock { $0.answered } }

    /// `true` once: a coordinator was found `bound` ago or more, and no heartbeat was ever answered.
    func due(now: ContinuousClock.Instant = .now) -> Bool {
        state.withLock { state in
            guard !state.answered, !state.reported, let found = state.coordinatorFound, now - found >= bound else {
                return false
            }
            state.reported = true
            return true
        }
    }

    static let message =
        "the group coordinator never answered ConsumerGroupHeartbeat: the broker does not speak the next-generation "
        + "group protocol (it needs Apache Kafka 4.0 or later), so this member is given no partition; "
        + "set consumer.groupProtocol: classic, or upgrade the broker"
}
