import Logging
import APNs
import Kafka

/// Typing and checking, one section at a time, in the file's order.
extension WorkerConfiguration {
    static func decode(_ root: inout ConfigSection) throws(ConfigurationError) -> WorkerConfiguration {
        let kafka = try root.required("kafka", root.properties("kafka"))
        guard let servers = kafka["bootstrap.servers"], !servers.isEmpty else {
            throw ConfigurationError(
                code: .missingKey, file: root.file, keyPath: "kafka.bootstrap.servers", line: root.node("kafka")?.line,
                message: "required key is missing")
        }
        var consumerSection = try root.required("consumer", root.section("consumer"))
        let consumer = try decodeConsumer(&consumerSection)
        var producer = ProducerSettings()
        if var section = try root.section("producer") {
            producer.deliveryTimeout = try section.duration("deliveryTimeout") ?? producer.deliveryTimeout
            producer.properties = try section.properties("properties") ?? [:]
            try section.finish()
        }
        var topicsSection = try root.required("topics", root.section("topics"))
        let topics = TopicSettings(
            results: try topicsSection.required("results", topicsSection.string("results")),
            deadLetters: try topicsSection.required("deadLetters", topicsSection.string("deadLetters")))
        // A results or dead-letter topic that is also an input would feed the worker its own output.
        for (key, topic) in [("results", topics.results), ("deadLetters", topics.deadLetters)]
        where consumer.topics.contains(topic) {
            throw topicsSection.error(
                key, topicsSection.node(key),
                "\"\(topic)\" is also an input topic (consumer.topics): the worker would consume its own output")
        }
        if topics.results == topics.deadLetters {
            throw topicsSection.error(
                "deadLetters", topicsSection.node("deadLetters"),
                "must differ from topics.results: results and dead letters are different formats")
        }
        try topicsSection.finish()
        var apnsSection = try root.required("apns", root.section("apns"))
        let apns = try decodeAPNs(&apnsSection)
        var delivery = DeliverySettings()
        if var section = try root.section("delivery") {
            let line = section.node("revocationTimeout")?.line
            delivery = try decodeDelivery(&section)
            try checkRevocationFits(delivery, kafka: kafka, consumer: consumer, file: root.file, line: line)
        } else {
            try checkRevocationFits(delivery, kafka: kafka, consumer: consumer, file: root.file, line: nil)
        }
        var http = HTTPSettings()
        if var section = try root.section("http") {
            http.host = try section.string("host") ?? http.host
            http.port = try section.int("port", in: 0...65535) ?? http.port
            try section.finish()
        }
        var logging = LoggingSettings()
        if var section = try root.section("logging") {
            logging.level = try section.choice("level", Logger.Level.allCases) ?? logging.level
            logging.format = try section.choice("format", LoggingSettings.Format.allCases) ?? logging.format
            try section.finish()
        }
        return WorkerConfiguration(
            kafka: kafka, consumer: consumer, producer: producer, topics: topics, apns: apns, delivery: delivery,
            http: http, logging: logging)
    }

    /// A revocation holds librdkafka's poll thread while it drains (up to `revocationTimeout`) and
    /// commits (up to `revocationTimeout` again); past `max.poll.interval.ms` without a poll the
    /// member is thrown out of its group in the middle of it.
    private static func checkRevocationFits(
        _ delivery: DeliverySettings, kafka: [String: String], consumer: ConsumerSettings, file: String, line: Int?
    ) throws(ConfigurationError) {
        let configured = consumer.properties["max.poll.interval.ms"] ?? kafka["max.poll.interval.ms"]
        let pollInterval =
            configured.flatMap(Int64.init).map(Duration.milliseconds)
            ?? KafkaConsumerConfiguration(bootstrapServers: "", groupID: "").maxPollInterval
        let needed = delivery.revocationTimeout * 2 + .seconds(5)
        guard pollInterval < needed else { return }
        throw ConfigurationError(
            code: .invalidValue, file: file, keyPath: "delivery.revocationTimeout", line: line,
            message:
                "a revocation may hold the poll thread for twice this (drain, then commit), which must stay "
                + "below max.poll.interval.ms (\(pollInterval)) with 5 s to spare: "
                + "lower it or raise max.poll.interval.ms")
    }

    private static func decodeConsumer(_ section: inout ConfigSection) throws(ConfigurationError) -> ConsumerSettings {
        var consumer = ConsumerSettings(topics: [])
        consumer.group = try section.string("group") ?? consumer.group
        consumer.topics = try section.required("topics", section.stringList("topics"))
        if consumer.topics.isEmpty {
            throw section.error("topics", section.node("topics"), "expected at least one input topic")
        }
        consumer.bufferCapacity = try section.int("bufferCapacity", in: 1...Int.max) ?? consumer.bufferCapacity
        consumer.bufferBytes = try section.int("bufferBytes", in: 65536...Int.max) ?? consumer.bufferBytes
        consumer.properties = try section.properties("properties") ?? [:]
        try section.finish()
        return consumer
    }

    private static func decodeDelivery(_ section: inout ConfigSection) throws(ConfigurationError) -> DeliverySettings {
        var delivery = DeliverySettings()
        delivery.maxInFlight = try section.int("maxInFlight", in: 1...Int.max) ?? delivery.maxInFlight
        delivery.maxInFlightBytes =
            try section.int("maxInFlightBytes", in: 65536...Int.max) ?? delivery.maxInFlightBytes
        delivery.commitInterval = try section.duration("commitInterval") ?? delivery.commitInterval
        if var retry = try section.section("retry") {
            delivery.retry.maxAttempts = try retry.int("maxAttempts", in: 1...Int.max) ?? delivery.retry.maxAttempts
            delivery.retry.initialBackoff = try retry.duration("initialBackoff") ?? delivery.retry.initialBackoff
            delivery.retry.maxBackoff = try retry.duration("maxBackoff") ?? delivery.retry.maxBackoff
            delivery.retry.maxRetryDuration =
                try retry.duration("maxRetryDuration", allowZero: true) ?? delivery.retry.maxRetryDuration
            if delivery.retry.maxBackoff < delivery.retry.initialBackoff {
                throw retry.error("maxBackoff", retry.node("maxBackoff"), "must not be less than initialBackoff")
            }
            try retry.finish()
        }
        delivery.revocationTimeout = try section.duration("revocationTimeout") ?? delivery.revocationTimeout
        delivery.shutdownTimeout = try section.duration("shutdownTimeout") ?? delivery.shutdownTimeout
        if let age = try section.duration("maxEventAge", allowZero: true) {
            delivery.maxEventAge = age == .zero ? nil : age
        }
        delivery.maxRecordBytes = try section.int("maxRecordBytes", in: 1024...Int.max) ?? delivery.maxRecordBytes
        delivery.publishBlockedLimit = try section.duration("publishBlockedLimit") ?? delivery.publishBlockedLimit
        delivery.progressTopic = try section.string("progressTopic")
        try section.finish()
        return delivery
    }

    private static func decodeAPNs(_ section: inout ConfigSection) throws(ConfigurationError) -> APNsSettings {
        var apns = APNsSettings(credentials: [])
        apns.connectionsPerCredential =
            try section.int("connectionsPerCredential", in: 1...Int.max) ?? apns.connectionsPerCredential
        apns.requestTimeout = try section.duration("requestTimeout") ?? apns.requestTimeout
        apns.eventLoopThreads = try section.int("eventLoopThreads", in: 1...64)
        apns.caFile = try section.string("caFile")
        apns.collapseIdFromEventId = try section.bool("collapseIdFromEventId") ?? apns.collapseIdFromEventId
        if let proxy = try section.string("proxy") {
            switch proxy {
            case "none": apns.proxy = .none
            case "environment": apns.proxy = .environment
            default:
                do {
                    apns.proxy = .url(try APNsProxy(url: proxy))
                } catch {
                    // The message never quotes the URL: it may carry a password.
                    throw section.error(
                        "proxy", section.node("proxy"),
                        "\(error); expected none, environment or http://[user:password@]host[:port]")
                }
            }
        }
        if var endpoints = try section.section("endpoints") {
            apns.endpoints.production = try decodeEndpoint(&endpoints, "production", apns.endpoints.production)
            apns.endpoints.development = try decodeEndpoint(&endpoints, "development", apns.endpoints.development)
            try endpoints.finish()
        }
        let items = try section.required("credentials", section.list("credentials"))
        if items.isEmpty {
            throw section.error("credentials", section.node("credentials"), "expected at least one credential")
        }
        var names: Set<String> = []
        for (index, item) in items.enumerated() {
            var credential = try ConfigSection(item, file: section.file, path: section.keyPath("credentials[\(index)]"))
            let decoded = try decodeCredential(&credential)
            guard names.insert(decoded.name).inserted else {
                throw credential.error("name", credential.node("name"), "duplicate credential name \"\(decoded.name)\"")
            }
            apns.credentials.append(decoded)
        }
        try section.finish()
        return apns
    }

    private static func decodeEndpoint(
        _ section: inout ConfigSection, _ key: String, _ defaults: APNsSettings.Endpoint
    ) throws(ConfigurationError) -> APNsSettings.Endpoint {
        guard var endpoint = try section.section(key) else { return defaults }
        let result = APNsSettings.Endpoint(
            host: try endpoint.string("host") ?? defaults.host,
            port: try endpoint.int("port", in: 1...65535) ?? defaults.port)
        try endpoint.finish()
        return result
    }

    private static func decodeCredential(_ section: inout ConfigSection) throws(ConfigurationError)
        -> CredentialSettings
    {
        let name = try section.required("name", section.string("name"))
        let topics = try section.required("topics", section.stringList("topics"))
        if topics.isEmpty { throw section.error("topics", section.node("topics"), "expected at least one topic") }
        for pattern in topics where !CredentialSettings.isValidPattern(pattern) {
            throw section.error(
                "topics", section.node("topics"), "\"\(pattern)\": expected an exact topic or a prefix ending in \".*\""
            )
        }
        let environment = try section.choice("environment", APNsEnvironment.allCases)
        let token = try section.section("token")
        let certificate = try section.section("certificate")
        let kind: CredentialSettings.Kind
        switch (token, certificate) {
        case (var token?, nil):
            kind = .token(try decodeToken(&token))
        case (nil, var certificate?):
            kind = .certificate(try decodeCertificate(&certificate))
        case (.some, .some):
            throw section.error(
                "certificate", section.node("certificate"), "expected either token or certificate, not both")
        case (nil, nil):
            throw section.error("token", nil, "expected a token or a certificate section", code: .missingKey)
        }
        try section.finish()
        return CredentialSettings(name: name, topics: topics, kind: kind, environment: environment)
    }

    private static func decodeToken(_ section: inout ConfigSection) throws(ConfigurationError)
        -> TokenCredentialSettings
    {
        let teamID = try section.required("teamId", section.string("teamId"))
        let keyID = try section.required("keyId", section.string("keyId"))
        let key: TokenCredentialSettings.KeySource
        switch (try section.string("keyFile"), try section.string("keyEnv")) {
        case (let file?, nil): key = .file(file)
        case (nil, let variable?): key = .environment(variable)
        case (.some, .some):
            throw section.error("keyEnv", section.node("keyEnv"), "expected keyFile or keyEnv, not both")
        case (nil, nil): throw section.error("keyFile", nil, "expected keyFile or keyEnv", code: .missingKey)
        }
        try section.finish()
        return TokenCredentialSettings(teamID: teamID, keyID: keyID, key: key)
    }

    private static func decodeCertificate(
        _ section: inout ConfigSection
    ) throws(ConfigurationError) -> CertificateCredentialSettings {
        let certificateFile = try section.string("certificateFile")
        let privateKeyFile = try section.string("privateKeyFile")
        let p12File = try section.string("p12File")
        let source: CertificateCredentialSettings.Source
        switch (certificateFile, privateKeyFile, p12File) {
        case (let certificate?, let key?, nil): source = .pem(certificateFile: certificate, privateKeyFile: key)
        case (nil, nil, let p12?): source = .pkcs12(file: p12)
        case (_?, nil, nil):
            throw section.error("privateKeyFile", nil, "required with certificateFile", code: .missingKey)
        case (nil, _?, nil):
            throw section.error("certificateFile", nil, "required with privateKeyFile", code: .missingKey)
        case (nil, nil, nil):
            throw section.error(
                "certificateFile", nil, "expected certificateFile + privateKeyFile, or p12File", code: .missingKey)
        default:
            throw section.error(
                "p12File", section.node("p12File"), "expected certificateFile + privateKeyFile, or p12File, not both")
        }
        let password = try section.string("passwordEnv")
        try section.finish()
        return CertificateCredentialSettings(source: source, passwordEnvironmentVariable: password)
    }
}
