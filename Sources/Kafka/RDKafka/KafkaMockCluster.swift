internal import CRdKafka
import Glibc
import Logging
import Threading

/// librdkafka's mock cluster: real Kafka brokers' protocol over TCP on localhost, in this process,
/// with fault injection. For tests and the embedded demo; any Kafka client (kcat too) can connect.
///
/// Limits worth knowing: a partition keeps about 5 MiB or 100,000 records at most (older ones are
/// dropped); unknown topics are auto-created with 4 partitions; the first classic group join takes
/// about 3 s. It speaks both group protocols (classic and KIP-848's, in separate groups); under the
/// next-generation one it assigns by range on every change, not stickily as Kafka's assignors do,
/// and it does not implement the classic protocol's static membership.
package final class KafkaMockCluster: Sendable {
    /// The Kafka API keys that fault injection can target.
    package enum API: Int16, Sendable, CaseIterable {
        case produce = 0
        case fetch = 1
        case listOffsets = 2
        case metadata = 3
        case offsetCommit = 8
        case offsetFetch = 9
        case findCoordinator = 10
        case joinGroup = 11
        case heartbeat = 12
        case leaveGroup = 13
        case syncGroup = 14
        case initProducerID = 22
        case consumerGroupHeartbeat = 68
    }

    /// The client handle that owns the cluster (librdkafka ties a mock cluster to one).
    private let owner: RDKafkaClient
    /// The cluster itself; why sharing it across threads is safe is said at `MockClusterPointer`.
    private let cluster: MockClusterPointer
    /// `host:port,host:port,…` to give clients as `bootstrap.servers`.
    package let bootstrapServers: String
    package let brokerCount: Int
    /// Sockets holding the ports of brokers that are down (`setBroker(_:up:)`), by broker ID.
    private let heldPorts = Locked<[Int32: Int32]>([:])

    package init(brokers: Int = 1, logger: Logger = Logger(label: "kafka.mock")) throws(KafkaError) {
        let config = try RDKafkaConfig(properties: [("client.id", "mock-cluster-owner")])
        self.owner = try RDKafkaClient(
            .producer, config: config, callbacks: RDKafkaCallbacks(logger: logger))
        guard let cluster = rd_kafka_mock_cluster_new(owner.handle, Int32(brokers)) else {
            throw KafkaError(code: .invalidArgument, message: "could not start a mock cluster of \(brokers) brokers")
        }
        self.cluster = MockClusterPointer(cluster)
        self.bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
        self.brokerCount = brokers
    }

    deinit {
        for socket in heldPorts.withLock({ $0.values }) { close(socket) }
        // Before the owner handle goes (stored properties are released after this body).
        rd_kafka_mock_cluster_destroy(cluster.pointer)
    }

    package func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        try check(rd_kafka_mock_topic_create(cluster.pointer, name, Int32(partitions), Int32(replicationFactor)))
    }

    /// Makes the next `errors.count` requests of `api` fail with these errors, in order.
    package func failNextRequests(_ api: API, with errors: [KafkaError.Code]) {
        let codes = errors.map { rd_kafka_resp_err_t($0.rawValue) }
        codes.withUnsafeBufferPointer {
            rd_kafka_mock_push_request_errors_array(cluster.pointer, api.rawValue, $0.count, $0.baseAddress)
        }
    }

    /// Drops the errors still waiting for requests of `api`.
    package func clearRequestErrors(_ api: API) {
        rd_kafka_mock_clear_request_errors(cluster.pointer, api.rawValue)
    }

    /// Takes a broker down (its listener closes connections) or brings it back. IDs start at 1.
    ///
    /// A broker brought back listens on its old port again, and librdkafka aborts the process if it
    /// cannot ("Failed to create mock broker listener"): while the broker is down, anything else in
    /// the process (another cluster's listener, a client's outgoing connection) could take that
    /// ephemeral port. So the port is held here while the broker is down: bound (not listening, so
    /// connections are refused as by a broker that is down), and let go just before the broker
    /// listens again.
    package func setBroker(_ id: Int32, up: Bool) throws(KafkaError) {
        if up {
            heldPorts.withLock { held in
                if let socket = held.removeValue(forKey: id) { close(socket) }
            }
            try check(rd_kafka_mock_broker_set_up(cluster.pointer, id))
        } else {
            try check(rd_kafka_mock_broker_set_down(cluster.pointer, id))
            guard let port = brokerPort(id) else { return }
            let socket = Self.bindLoopback(port)
            guard socket >= 0 else { return }
            heldPorts.withLock { held in
                if let old = held.updateValue(socket, forKey: id) { close(old) }
            }
        }
    }

    /// The port broker `id` listens on: `bootstrapServers` lists the brokers in ID order.
    private func brokerPort(_ id: Int32) -> UInt16? {
        let servers = bootstrapServers.split(separator: ",")
        guard id >= 1, Int(id) <= servers.count, let port = servers[Int(id) - 1].split(separator: ":").last else {
            return nil
        }
        return UInt16(port)
    }

    /// A TCP socket bound to 127.0.0.1:`port` with SO_REUSEADDR (the broker's closed connections
    /// linger in TIME_WAIT on it), or -1.
    private static func bindLoopback(_ port: UInt16) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    /// Adds this round-trip time to every response from a broker.
    package func setRoundTripTime(broker id: Int32, _ rtt: Duration) throws(KafkaError) {
        try check(rd_kafka_mock_broker_set_rtt(cluster.pointer, id, Int32(rtt.milliseconds)))
    }

    /// Moves a partition's leadership to a broker.
    package func setLeader(topic: String, partition: Int32, broker id: Int32) throws(KafkaError) {
        try check(rd_kafka_mock_partition_set_leader(cluster.pointer, topic, partition, id))
    }

    /// The session timeout and heartbeat interval of every next-generation (KIP-848) group, which the
    /// broker owns under that protocol (30 s and 3 s by default on the mock), from each member's next
    /// heartbeat on.
    package func setConsumerGroupTimings(session: Duration, heartbeat: Duration) {
        rd_kafka_mock_set_group_consumer_session_timeout_ms(cluster.pointer, Int32(session.milliseconds))
        rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(cluster.pointer, Int32(heartbeat.milliseconds))
    }

    /// Makes the cluster say in its ApiVersions answers that it does not support `api` at all (as a
    /// broker before Apache Kafka 4.0 lacks ConsumerGroupHeartbeat), for clients that connect from now on.
    package func withdraw(_ api: API) throws(KafkaError) {
        try check(rd_kafka_mock_set_apiversion(cluster.pointer, api.rawValue, -1, -1))
    }

    /// Makes a broker the coordinator of a consumer group.
    package func setGroupCoordinator(group: String, broker id: Int32) throws(KafkaError) {
        try check(rd_kafka_mock_coordinator_set(cluster.pointer, "group", group, id))
    }

    private func check(_ err: rd_kafka_resp_err_t) throws(KafkaError) {
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err) }
    }
}

/// The `rd_kafka_mock_cluster_t` pointer. `@unchecked Sendable`: librdkafka's mock API posts every
/// call to the cluster's own thread, so calls from any thread are safe; the pointer never changes and
/// lives until `KafkaMockCluster.deinit`.
private struct MockClusterPointer: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}
