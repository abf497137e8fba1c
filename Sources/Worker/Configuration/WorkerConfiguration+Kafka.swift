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

    /// `delivery.retry`.
    public var retryPolicy: RetryPolicy { delivery.retry }

    private var sharedKafkaProperties: [String: String] {
        kafka.filter { $0.key != "bootstrap.servers" }
    }
}
