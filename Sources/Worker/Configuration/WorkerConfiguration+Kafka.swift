import Kafka

extension WorkerConfiguration {
    /// `kafka` (minus `bootstrap.servers`, a typed field) then `consumer.properties`, which wins.
    package var kafkaConsumerConfiguration: KafkaConsumerConfiguration {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: bootstrapServers, groupID: consumer.group)
        configuration.bufferCapacity = consumer.bufferCapacity
        configuration.bufferByteCapacity = consumer.bufferBytes
        configuration.properties = sharedKafkaProperties.merging(consumer.properties) { _, specific in specific }
        return configuration
    }

    /// `kafka` then `producer.properties`; `producer.deliveryTimeout` is librdkafka's message timeout.
    package var kafkaProducerConfiguration: KafkaProducerConfiguration {
        var configuration = KafkaProducerConfiguration(bootstrapServers: bootstrapServers)
        configuration.deliveryTimeout = producer.deliveryTimeout
        configuration.properties = sharedKafkaProperties.merging(producer.properties) { _, specific in specific }
        return configuration
    }

    /// Has librdkafka check the consumer's and the producer's properties (unknown names, bad
    /// values) without connecting, so that they are configuration errors, found before anything runs.
    ///
    /// `environment`: the variables the configuration was loaded with, so that a property set by an
    /// `APNS_WORKER_KAFKA_*` variable is reported under the variable's name.
    package func checkKafkaProperties(file: String? = nil, environment: [String: String] = [:])
        throws(ConfigurationError)
    {
        do {
            try kafkaConsumerConfiguration.validate()
            try kafkaProducerConfiguration.validate()
        } catch {
            let property = error.property ?? ""
            let keyPath =
                consumer.properties[property] != nil
                ? "consumer.properties.\(property)"
                : producer.properties[property] != nil ? "producer.properties.\(property)" : "kafka.\(property)"
            let variable = environment.keys.first {
                guard let target = try? EnvironmentOverrides.resolve($0) else { return false }
                return target.path == ["kafka", property]
            }
            throw ConfigurationError(
                code: .invalidValue, file: variable == nil ? file : nil, keyPath: property.isEmpty ? "kafka" : keyPath,
                environmentVariable: variable, message: "librdkafka refused it: \(error.message)")
        }
    }

    /// `delivery.retry`.
    package var retryPolicy: RetryPolicy { delivery.retry }

    private var sharedKafkaProperties: [String: String] {
        kafka.filter { $0.key != "bootstrap.servers" }
    }
}
