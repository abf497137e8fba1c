import Kafka

extension WorkerConfiguration {
    /// `kafka` (minus `bootstrap.servers`, a typed field) then `consumer.properties`, which wins.
    public var kafkaConsumerConfiguration: KafkaConsumerConfiguration {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: bootstrapServers, groupID: consumer.group)
        configuration.bufferCapacity = consumer.bufferCapacity
        configuration.bufferByteCapacity = consumer.bufferBytes
        configuration.properties = sharedKafkaProperties.merging(consumer.properties) { _, specific in specific }
        return configuration
    }

    /// `kafka` then `producer.properties`; `producer.deliveryTimeout` is librdkafka's message timeout.
    public var kafkaProducerConfiguration: KafkaProducerConfiguration {
        var configuration = KafkaProducerConfiguration(bootstrapServers: bootstrapServers)
        configuration.deliveryTimeout = producer.deliveryTimeout
        configuration.properties = sharedKafkaProperties.merging(producer.properties) { _, specific in specific }
        return configuration
    }

    /// Has librdkafka check the consumer's and the producer's properties (unknown names, bad
    /// values) without connecting, so that they are configuration errors, found before anything runs.
    public func checkKafkaProperties(file: String? = nil) throws(ConfigurationError) {
        do {
            try kafkaConsumerConfiguration.validate()
            try kafkaProducerConfiguration.validate()
        } catch {
            let property = error.property ?? ""
            let keyPath =
                consumer.properties[property] != nil
                ? "consumer.properties.\(property)"
                : producer.properties[property] != nil ? "producer.properties.\(property)" : "kafka.\(property)"
            throw ConfigurationError(
                code: .invalidValue, file: file, keyPath: property.isEmpty ? "kafka" : keyPath,
                message: "librdkafka refused it: \(error.message)")
        }
    }

    /// `delivery.retry`.
    public var retryPolicy: RetryPolicy { delivery.retry }

    private var sharedKafkaProperties: [String: String] {
        kafka.filter { $0.key != "bootstrap.servers" }
    }
}
