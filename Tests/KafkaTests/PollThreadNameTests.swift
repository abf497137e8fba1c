import Foundation
import Kafka
import TestPeers
import Testing

/// The names the system gives this process's threads now (`/proc/self/task/*/comm`), as `top -H` and
/// `ps -L` show them.
private func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { fileText("/proc/self/task/\($0)/comm")?.trimmingCharacters(in: .whitespacesAndNewlines) }
}

@Suite("Thread names", .timeLimit(.minutes(1)))
struct PollThreadNameTests {
    @Test("a consumer's and a producer's poll threads show as kafka-consumer and kafka-producer")
    func pollThreadNames() async throws {
        let cluster = try KafkaMockCluster()
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: "thread-names-\(UUID().uuidString.prefix(8))"))
        let producer = try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers))
        // A thread names itself as it starts.
        var names: [String] = []
        for _ in 0..<500 {
            names = threadNames()
            if names.contains("kafka-consumer") && names.contains("kafka-producer") { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(names.contains("kafka-consumer"), "\(names)")
        #expect(names.contains("kafka-producer"), "\(names)")
        await consumer.close()
        await producer.close()
        withExtendedLifetime(cluster) {}  // the brokers outlive their clients
    }
}
