extension WorkerConfiguration: CustomStringConvertible {
    /// A one-line summary for the startup log, with every secret Kafka property redacted. (The
    /// synthesized reflection would print `sasl.password`; this is what `"\(configuration)"` gives.)
    package var description: String {
        let kafka = ConfigSecrets.redacted(self.kafka).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let consumerProperties = ConfigSecrets.redacted(consumer.properties).sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }
        let producerProperties = ConfigSecrets.redacted(producer.properties).sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }
        return "kafka[\(kafka.joined(separator: ", "))] consumer(group: \(consumer.group), topics: "
            + "\(consumer.topics.joined(separator: ",")), properties: [\(consumerProperties.joined(separator: ", "))]) "
            + "producer(properties: [\(producerProperties.joined(separator: ", "))]) "
            + "topics(results: \(topics.results), deadLetters: \(topics.deadLetters)) "
            + "apns(credentials: \(apns.credentials.map(\.name).joined(separator: ","))) "
            + "delivery(maxInFlight: \(delivery.maxInFlight)) http(\(http.host):\(http.port)) "
            + "logging(\(logging.level), \(logging.format.rawValue))"
    }
}
