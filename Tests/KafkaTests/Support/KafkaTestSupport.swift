import Foundation
import Kafka
import TestPeers
import Testing

/// A running broker of either kind.
final class TestCluster: Sendable {
    let broker: Broker
    let bootstrapServers: String
    let mock: KafkaMockCluster?
    let tansu: TansuBroker?

    private init(broker: Broker, mock: KafkaMockCluster?, tansu: TansuBroker?) {
        self.broker = broker
        self.mock = mock
        self.tansu = tansu
        self.bootstrapServers = mock?.bootstrapServers ?? tansu!.bootstrapServers
    }

    /// `mockBrokers`: how many brokers the mock cluster has (Tansu is one node); `tansuStorage`: where
    /// Tansu keeps its data (`.s3` survives `TansuBroker.restart(signal:)`).
    static func start(_ broker: Broker, mockBrokers: Int = 1, tansuStorage: TansuBroker.Storage = .memory)
        async throws -> TestCluster
    {
        switch broker {
        case .mock: TestCluster(broker: broker, mock: try KafkaMockCluster(brokers: mockBrokers), tansu: nil)
        case .tansu: TestCluster(broker: broker, mock: nil, tansu: try await TansuBroker.start(storage: tansuStorage))
        }
    }

    func createTopic(_ name: String, partitions: Int, mockReplicationFactor: Int = 1) async throws {
        if let mock { try mock.createTopic(name, partitions: partitions, replicationFactor: mockReplicationFactor) }
        if let tansu { try await tansu.createTopic(name, partitions: partitions) }
    }

    /// Stops Tansu (the mock cluster goes with its last reference).
    func shutdown() async {
        await tansu?.shutdown()
    }
}

struct TimeoutError: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out: \(what)" }
}

/// Runs `body`, cancelling it and throwing if it takes longer than `seconds`.
func withTimeout<T: Sendable>(
    _ seconds: Double, _ what: String = "operation", _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimeoutError(what: what)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// A unique name per test, so tests sharing nothing can run in parallel.
func uniqueName(_ prefix: String) -> String {
    "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())"
}

func consumerConfiguration(_ cluster: KafkaMockCluster, group: String) -> KafkaConsumerConfiguration {
    consumerConfiguration(bootstrapServers: cluster.bootstrapServers, broker: .mock, group: group)
}

func consumerConfiguration(_ cluster: TestCluster, group: String) -> KafkaConsumerConfiguration {
    consumerConfiguration(bootstrapServers: cluster.bootstrapServers, broker: cluster.broker, group: group)
}

func consumerConfiguration(bootstrapServers: String, broker: Broker, group: String) -> KafkaConsumerConfiguration {
    var configuration = KafkaConsumerConfiguration(bootstrapServers: bootstrapServers, groupID: group)
    // The mock cluster's defaults make a group take seconds to settle; these keep tests quick.
    // Tansu holds every join for half of the session time-out: 6 s makes a join take 3 s.
    configuration.sessionTimeout = broker == .mock ? .seconds(10) : .seconds(6)
    configuration.properties["heartbeat.interval.ms"] = "500"
    configuration.properties["topic.metadata.refresh.interval.ms"] = "1000"
    return configuration
}

func producerConfiguration(_ cluster: KafkaMockCluster) -> KafkaProducerConfiguration {
    producerConfiguration(bootstrapServers: cluster.bootstrapServers)
}

func producerConfiguration(_ cluster: TestCluster) -> KafkaProducerConfiguration {
    producerConfiguration(bootstrapServers: cluster.bootstrapServers)
}

func producerConfiguration(bootstrapServers: String) -> KafkaProducerConfiguration {
    var configuration = KafkaProducerConfiguration(bootstrapServers: bootstrapServers)
    configuration.linger = .milliseconds(2)
    return configuration
}

/// Reads `count` records (or throws after `seconds`).
func read(_ count: Int, from consumer: KafkaConsumer, within seconds: Double = 90) async throws
    -> [KafkaConsumerMessage]
{
    try await withTimeout(seconds, "reading \(count) records") {
        var records: [KafkaConsumerMessage] = []
        records.reserveCapacity(count)
        for try await record in consumer.messages {
            records.append(record)
            if records.count == count { break }
        }
        return records
    }
}

/// Reads whatever arrives within `seconds` (the reader is cancelled then).
func readAvailable(from consumer: KafkaConsumer, for seconds: Double) async throws -> [KafkaConsumerMessage] {
    let collected = TestLocked<[KafkaConsumerMessage]>([])
    let reader = Task {
        for try await record in consumer.messages { collected.withLock { $0.append(record) } }
    }
    try await Task.sleep(for: .seconds(seconds))
    reader.cancel()
    _ = await reader.result
    return collected.withLock { $0 }
}

/// Records rebalance callbacks, and commits the offsets a test processed when partitions go.
final class RecordingRebalanceHandler: KafkaRebalanceHandler {
    enum Event: Equatable, Sendable {
        case assigned([KafkaTopicPartition])
        case revoked([KafkaTopicPartition], lost: Bool)
    }

    private let state = TestLocked<(events: [Event], processed: [KafkaTopicPartition: Int64])>(([], [:]))
    let consumer = TestLocked<KafkaConsumer?>(nil)
    let commitFailures = TestLocked<[String]>([])

    var events: [Event] { state.withLock { $0.events } }

    func processed(_ record: KafkaConsumerMessage) {
        state.withLock { $0.processed[record.topicPartition] = record.offset + 1 }
    }

    func partitionsAssigned(_ partitions: [KafkaTopicPartition], tenure: UInt64) async {
        state.withLock { $0.events.append(.assigned(partitions.sorted())) }
    }

    func partitionsRevoked(_ partitions: [KafkaTopicPartition], lost: Bool) async {
        let offsets = state.withLock { state in
            state.events.append(.revoked(partitions.sorted(), lost: lost))
            return partitions.compactMap { partition in
                state.processed.removeValue(forKey: partition).map { KafkaTopicPartitionOffset(partition, offset: $0) }
            }
        }
        if let consumer = consumer.withLock({ $0 }), !lost {
            do {
                try await consumer.commit(offsets)
            } catch {
                commitFailures.withLock { $0.append("\(error)") }
            }
        }
    }

    func commitProcessed() async throws {
        let offsets = state.withLock { $0.processed.map { KafkaTopicPartitionOffset($0.key, offset: $0.value) } }
        try await consumer.withLock({ $0 })?.commit(offsets)
    }
}

/// A value behind an `NSLock`, which ThreadSanitizer can see (`Synchronization.Mutex` on Linux it
/// cannot, and would make the sanitizer run report every guarded access).
final class TestLocked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// The first member leaves (its revocation commits what it processed), its reader ends, the second
/// takes all `partitions`, every one of `untilRead` records is read by one of them (`seen`), and the
/// second closes too.
func handOver(
    from first: (KafkaConsumer, Task<Void, any Error>), to second: (KafkaConsumer, Task<Void, any Error>),
    partitions: Int, untilRead total: Int, seen: [TestLocked<[Int]>]
) async throws {
    await first.0.close()
    _ = await first.1.result
    try await withTimeout(30, "the second member taking over") {
        while second.0.assignment.count != partitions { try await Task.sleep(for: .milliseconds(100)) }
    }
    try await withTimeout(60, "every record read") {
        while Set(seen.flatMap { $0.withLock { $0 } }).count < total { try await Task.sleep(for: .milliseconds(100)) }
    }
    await second.0.close()
    _ = await second.1.result
}
