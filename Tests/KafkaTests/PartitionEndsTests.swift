import Foundation
import Kafka
import TestPeers
import Testing

/// `KafkaConsumer.ends(of:timeout:)`: every partition's end asked at once, each answer as it comes.
@Suite("Partition ends, asked for many partitions at once", .serialized, .timeLimit(.minutes(1)))
struct PartitionEndsTests {
    /// A topic of three partitions holding 3, 4 and 5 records, partition 2 led by broker 2 (slow
    /// from then on by `rtt`), a consumer that has its metadata, and the partitions.
    func setUp(rtt: Duration) async throws -> (KafkaMockCluster, KafkaConsumer, [KafkaTopicPartition]) {
        let cluster = try KafkaMockCluster(brokers: 2)
        let topic = uniqueName("ends")
        try cluster.createTopic(topic, partitions: 3)
        for partition in Int32(0)..<3 { try cluster.setLeader(topic: topic, partition: partition, broker: 1) }
        try cluster.setLeader(topic: topic, partition: 2, broker: 2)
        let producer = try KafkaProducer(configuration: producerConfiguration(cluster))
        for partition in Int32(0)..<3 {
            for index in 0..<(3 + Int(partition)) {
                try await producer.send(
                    KafkaProducerMessage(topic: topic, partition: partition, value: Array("\(index)".utf8))
                ) { _ in }
            }
        }
        try await producer.flush(timeout: .seconds(30))
        await producer.close()
        let consumer = try KafkaConsumer(configuration: consumerConfiguration(cluster, group: uniqueName("g")))
        let partitions = (Int32(0)..<3).map { KafkaTopicPartition(topic: topic, partition: $0) }
        for partition in partitions { _ = try await consumer.watermarks(of: partition) }  // connected, leaders known
        try cluster.setRoundTripTime(broker: 2, rtt)
        return (cluster, consumer, partitions)
    }

    @Test("each partition's end, the slow leader's last: it delays only its own partition")
    func answersAsTheyCome() async throws {
        let (cluster, consumer, partitions) = try await setUp(rtt: .seconds(2))
        let began = ContinuousClock.now
        var answers: [(partition: KafkaTopicPartition, end: Int64, after: Duration)] = []
        for await answer in consumer.ends(of: partitions, timeout: .seconds(20)) {
            answers.append((answer.partition, try answer.end.get(), .now - began))
        }
        await consumer.close()
        _ = cluster
        #expect(answers.map(\.partition).suffix(1) == [partitions[2]], "the slow leader answers last")
        #expect(
            Dictionary(uniqueKeysWithValues: answers.map { ($0.partition, $0.end) }) == [
                partitions[0]: 3, partitions[1]: 4, partitions[2]: 5,
            ])
        for answer in answers where answer.partition != partitions[2] {
            #expect(answer.after < .seconds(1), "\(answer.partition) waited for the slow leader")
        }
    }

    @Test("past the timeout the partitions not answered are left out and the answers end")
    func timeout() async throws {
        let (cluster, consumer, partitions) = try await setUp(rtt: .seconds(5))
        let began = ContinuousClock.now
        var answered: [KafkaTopicPartition] = []
        for await answer in consumer.ends(of: partitions, timeout: .seconds(1)) {
            if case .success = answer.end { answered.append(answer.partition) }
        }
        let took = ContinuousClock.now - began
        await consumer.close()
        _ = cluster
        #expect(Set(answered) == [partitions[0], partitions[1]])
        #expect(took < .seconds(3), "the answers ended \(took) after the question")
    }
}
