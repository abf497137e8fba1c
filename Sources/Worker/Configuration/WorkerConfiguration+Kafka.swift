import Kafka

extension WorkerConfiguration {
    /// `kafka` (minus `bootstrap.servers`, a typed field) then `consumer.properties`, which wins.
    package var kafkaConsumerConfiguration: KafkaConsumerConfiguration {
        var configuration = KafkaConsumerConfiguration(bootstrapServers: bootstrapServers, groupID: consumer.group)
        configuration.groupProtocol = consumer.groupProtocol
        configuration.bufferCapacity = consumer.bufferCapacity
        configuration.bufferByteCapacity = consumer.bufferBytes
        configuration.stallBound = consumer.stallAfter
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

    /// Every property librdkafka refuses, found without connecting: each checked on its own (so that
    /// all are found at once), then, with `combination`, the whole of each configuration (for what
    /// only the combination shows). A property set by an `APNS_WORKER_KAFKA_*` variable of
    /// `environment` is reported under the variable's name; `root`, the parsed file, gives the others'
    /// lines.
    func kafkaPropertyProblems(file: String, environment: [String: String], root: ConfigNode, combination: Bool)
        -> [ConfigurationError]
    {
        func problem(_ property: String, _ message: String) -> ConfigurationError {
            let section =
                consumer.properties[property] != nil
                ? ["consumer", "properties"]
                : producer.properties[property] != nil ? ["producer", "properties"] : ["kafka"]
            let variable = environment.keys.first {
                guard let target = try? EnvironmentOverrides.resolve($0) else { return false }
                return target.path == ["kafka", property]
            }
            return ConfigurationError(
                code: .invalidValue, file: variable == nil ? file : nil,
                keyPath: property.isEmpty ? "kafka" : (section + [property]).joined(separator: "."),
                line: variable == nil ? root.line(at: section + [property]) : nil,
                environmentVariable: variable, message: "librdkafka refused it: \(message)")
        }
        var problems: [ConfigurationError] = []
        for properties in [kafka, consumer.properties, producer.properties] {
            for (name, value) in properties.sorted(by: { $0.key < $1.key }) where name != "bootstrap.servers" {
                if let refusal = KafkaPropertyReading.refusal(of: name, value: value) {
                    problems.append(problem(name, refusal.message))
                }
            }
        }
        guard problems.isEmpty, combination else { return problems }
        do {
            try kafkaConsumerConfiguration.validate()
            try kafkaProducerConfiguration.validate()
        } catch {
            problems.append(problem(error.property ?? "", error.message))
        }
        return problems
    }

    /// `delivery.retry`.
    package var retryPolicy: RetryPolicy { delivery.retry }

    private var sharedKafkaProperties: [String: String] {
        kafka.filter { $0.key != "bootstrap.servers" }
    }
}
