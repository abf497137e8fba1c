import Logging
import APNs
import Kafka

/// Typing and checking, one section at a time, in the file's order.
extension WorkerConfiguration {
    /// Every section typed and checked; each problem is recorded in `root.problems` (in the file's
    /// order) and decoding goes on with a default in its place, so that one run finds them all. The
    /// result is only used when there is none.
    static func decode(_ root: inout ConfigSection) -> WorkerConfiguration {
        let kafka = root.required("kafka", root.properties("kafka")) ?? [:]
        if root.node("kafka") != nil, kafka["bootstrap.servers"]?.isEmpty ?? true {
            root.report(
                ConfigurationError(
                    code: .missingKey, file: root.file, keyPath: "kafka.bootstrap.servers",
                    line: root.node("kafka")?.line, message: "required key is missing"))
        }
        var consumer = ConsumerSettings(topics: [])
        if var section = root.required("consumer", root.section("consumer")) {
            consumer = decodeConsumer(&section)
        }
        for problem in groupProtocolProblems(&root, kafka: kafka, consumer: consumer) { root.report(problem) }
        var producer = ProducerSettings()
        if var section = root.section("producer") {
            producer.deliveryTimeout =
                section.duration("deliveryTimeout", max: .seconds(24 * 3600)) ?? producer.deliveryTimeout
            producer.properties = section.properties("properties") ?? [:]
            section.finish()
        }
        var topics = TopicSettings(results: "", deadLetters: "")
        if var section = root.required("topics", root.section("topics")) {
            topics = decodeTopics(&section, inputs: consumer.topics)
        }
        var apns = APNsSettings(credentials: [])
        if var section = root.required("apns", root.section("apns")) {
            apns = decodeAPNs(&section)
        }
        var delivery = DeliverySettings()
        var revocationLine: Int?
        if var section = root.section("delivery") {
            revocationLine = section.node("revocationTimeout")?.line
            delivery = decodeDelivery(&section)
        }
        if let problem = revocationProblem(
            delivery, kafka: kafka, consumer: consumer, file: root.file, line: revocationLine)
        {
            root.report(problem)
        }
        var http = HTTPSettings()
        if var section = root.section("http") {
            http.host = section.string("host") ?? http.host
            http.port = section.int("port", in: 0...65535) ?? http.port
            section.finish()
        }
        var logging = LoggingSettings()
        if var section = root.section("logging") {
            logging.level = section.choice("level", Logger.Level.allCases) ?? logging.level
            logging.format = section.choice("format", LoggingSettings.Format.allCases) ?? logging.format
            section.finish()
        }
        var configuration = WorkerConfiguration(
            kafka: kafka, consumer: consumer, producer: producer, topics: topics, apns: apns, delivery: delivery,
            http: http, logging: logging)
        if var section = root.section("tracing") {
            configuration.tracing = decodeTracing(&section)
            section.finish()
        }
        return configuration
    }

    private static func decodeTopics(_ section: inout ConfigSection, inputs: [String]) -> TopicSettings {
        let topics = TopicSettings(
            results: section.required("results", section.string("results")) ?? "",
            deadLetters: section.required("deadLetters", section.string("deadLetters")) ?? "")
        // A results or dead-letter topic that is also an input would feed the worker its own output.
        for (key, topic) in [("results", topics.results), ("deadLetters", topics.deadLetters)]
        where inputs.contains(topic) {
            section.report(
                section.error(
                    key, section.node(key),
                    "\"\(topic)\" is also an input topic (consumer.topics): the worker would consume its own output"))
        }
        if !topics.results.isEmpty, topics.results == topics.deadLetters {
            section.report(
                section.error(
                    "deadLetters", section.node("deadLetters"),
                    "must differ from topics.results: results and dead letters are different formats"))
        }
        section.finish()
        return topics
    }

    /// A revocation holds librdkafka's poll thread while it drains (up to `revocationTimeout`) and
    /// commits (up to `revocationTimeout` again); past `max.poll.interval.ms` without a poll the
    /// member is thrown out of its group in the middle of it.
    private static func revocationProblem(
        _ delivery: DeliverySettings, kafka: [String: String], consumer: ConsumerSettings, file: String, line: Int?
    ) -> ConfigurationError? {
        // As librdkafka reads it (any of its names for the property), as the consumer bounds itself.
        var settings = KafkaConsumerConfiguration(bootstrapServers: "", groupID: "")
        settings.properties = kafka.merging(consumer.properties) { _, specific in specific }
        let pollInterval = settings.effective.maxPollInterval
        let needed = delivery.revocationTimeout * 2 + .seconds(5)
        guard pollInterval < needed else { return nil }
        return ConfigurationError(
            code: .invalidValue, file: file, keyPath: "delivery.revocationTimeout", line: line,
            message:
                "a revocation may hold the poll thread for twice this (drain, then commit), which must stay "
                + "below max.poll.interval.ms (\(pollInterval)) with 5 s to spare: "
                + "lower it or raise max.poll.interval.ms")
    }

    private static func decodeConsumer(_ section: inout ConfigSection) -> ConsumerSettings {
        var consumer = ConsumerSettings(topics: [])
        consumer.group = section.string("group") ?? consumer.group
        consumer.groupProtocol = section.choice("groupProtocol", KafkaGroupProtocol.allCases) ?? consumer.groupProtocol
        consumer.topics = section.required("topics", section.stringList("topics")) ?? []
        if consumer.topics.isEmpty, let node = section.node("topics") {
            section.report(section.error("topics", node, "expected at least one input topic"))
        }
        consumer.bufferCapacity = section.int("bufferCapacity", in: 1...1_000_000) ?? consumer.bufferCapacity
        consumer.bufferBytes = section.int("bufferBytes", in: 65536...4_294_967_296) ?? consumer.bufferBytes
        if let stallAfter = section.duration("stallAfter", allowZero: true, max: .seconds(24 * 3600)) {
            consumer.stallAfter = stallAfter == .zero ? nil : stallAfter
        }
        consumer.properties = section.properties("properties") ?? [:]
        if var lanes = section.section("lanes") {
            // consumer.topics set from the environment: a lane's error says so, or the file is blamed.
            let from = section.node("topics")?.environmentVariable
            consumer.urgent = decodeLanes(&lanes, inputs: consumer.topics, inputsFrom: from)
        }
        section.finish()
        return consumer
    }

    /// `consumer.lanes`: `urgent` (its topics, its in-flight bound) and, optionally, `bulk` (its
    /// topics: the rest of the input topics, said out loud). Each topic is an input topic and in
    /// one lane; no lane is empty.
    private static func decodeLanes(_ lanes: inout ConfigSection, inputs: [String], inputsFrom: String?)
        -> UrgentLane?
    {
        var urgent: UrgentLane?
        var urgentTopics: [String] = []
        if var section = lanes.required("urgent", lanes.section("urgent")) {
            urgentTopics = laneTopics(&section, lane: "urgent", inputs: inputs, inputsFrom: inputsFrom, other: nil)
            var lane = UrgentLane(topics: urgentTopics)
            lane.maxInFlight = section.int("maxInFlight", in: 1...1_000_000) ?? lane.maxInFlight
            lane.connectionsPerCredential =
                section.int("connectionsPerCredential", in: 1...64) ?? lane.connectionsPerCredential
            section.finish()
            if !urgentTopics.isEmpty { urgent = lane }
        }
        var bulkTopics = inputs.filter { !urgentTopics.contains($0) }
        if var section = lanes.section("bulk") {
            bulkTopics = laneTopics(
                &section, lane: "bulk", inputs: inputs, inputsFrom: inputsFrom, other: ("urgent", urgentTopics))
            let unassigned = inputs.filter { !urgentTopics.contains($0) && !bulkTopics.contains($0) }
            if !unassigned.isEmpty {
                section.report(
                    section.error(
                        "topics", section.node("topics"),
                        "input topic \(unassigned.map { "\"\($0)\"" }.joined(separator: ", ")) is in no lane: "
                            + "name it in consumer.lanes.urgent.topics or here"))
            }
            section.finish()
        } else if urgent != nil, bulkTopics.isEmpty {
            lanes.report(
                lanes.error(
                    "urgent", lanes.node("urgent"),
                    "every input topic is urgent, so no lane is left for the rest: "
                        + "leave out consumer.lanes, or add the bulk topics to consumer.topics"))
        }
        lanes.finish()
        return urgent
    }

    /// A lane's `topics`: at least one, each an input topic, none named twice or in `other` too.
    private static func laneTopics(
        _ section: inout ConfigSection, lane: String, inputs: [String], inputsFrom: String?,
        other: (name: String, topics: [String])?
    ) -> [String] {
        let source = inputsFrom.map { " (\(inputs.joined(separator: ", ")), set by \($0))" } ?? ""
        let topics = section.required("topics", section.stringList("topics")) ?? []
        let node = section.node("topics")
        if topics.isEmpty, node != nil {
            section.report(section.error("topics", node, "a lane needs at least one topic"))
        }
        var seen: Set<String> = []
        for topic in topics {
            if !inputs.contains(topic) {
                section.report(
                    section.error(
                        "topics", node,
                        "\"\(topic)\" is not an input topic: a lane's topics are some of consumer.topics\(source)"))
            } else if !seen.insert(topic).inserted {
                section.report(section.error("topics", node, "\"\(topic)\" is named twice"))
            } else if let other, other.topics.contains(topic) {
                section.report(
                    section.error(
                        "topics", node,
                        "\"\(topic)\" is also in consumer.lanes.\(other.name): a topic is in one lane"))
            }
        }
        return topics.filter { inputs.contains($0) }
    }

    private static func decodeDelivery(_ section: inout ConfigSection) -> DeliverySettings {
        var delivery = DeliverySettings()
        delivery.maxInFlight = section.int("maxInFlight", in: 1...1_000_000) ?? delivery.maxInFlight
        delivery.maxInFlightBytes =
            section.int("maxInFlightBytes", in: 65536...17_179_869_184) ?? delivery.maxInFlightBytes
        delivery.maxInFlightPerCredential = section.int("maxInFlightPerCredential", in: 1...1_000_000)
        delivery.maxParked = section.int("maxParked", in: 1...10_000_000)
        delivery.commitInterval = section.duration("commitInterval", max: .seconds(1 * 3600)) ?? delivery.commitInterval
        if var retry = section.section("retry") {
            delivery.retry.maxAttempts = retry.int("maxAttempts", in: 1...1000) ?? delivery.retry.maxAttempts
            delivery.retry.initialBackoff =
                retry.duration("initialBackoff", max: .seconds(1 * 3600)) ?? delivery.retry.initialBackoff
            delivery.retry.maxBackoff =
                retry.duration("maxBackoff", max: .seconds(1 * 3600)) ?? delivery.retry.maxBackoff
            delivery.retry.maxRetryDuration =
                retry.duration("maxRetryDuration", allowZero: true, max: .seconds(168 * 3600))
                ?? delivery.retry.maxRetryDuration
            if delivery.retry.maxBackoff < delivery.retry.initialBackoff {
                retry.report(Self.backoffOrder(&retry, delivery.retry))
            }
            retry.finish()
        }
        delivery.revocationTimeout =
            section.duration("revocationTimeout", max: .seconds(1 * 3600)) ?? delivery.revocationTimeout
        delivery.shutdownTimeout =
            section.duration("shutdownTimeout", max: .seconds(1 * 3600)) ?? delivery.shutdownTimeout
        if let age = section.duration("maxEventAge", allowZero: true, max: .seconds(720 * 3600)) {
            delivery.maxEventAge = age == .zero ? nil : age
        }
        delivery.maxRecordBytes = section.int("maxRecordBytes", in: 1024...1_073_741_824) ?? delivery.maxRecordBytes
        delivery.publishBlockedLimit =
            section.duration("publishBlockedLimit", max: .seconds(24 * 3600)) ?? delivery.publishBlockedLimit
        delivery.progressTopic = section.string("progressTopic")
        section.finish()
        return delivery
    }

    private static func decodeAPNs(_ section: inout ConfigSection) -> APNsSettings {
        var apns = APNsSettings(credentials: [])
        apns.connectionsPerCredential =
            section.int("connectionsPerCredential", in: 1...64) ?? apns.connectionsPerCredential
        apns.requestTimeout = section.duration("requestTimeout", max: .seconds(600)) ?? apns.requestTimeout
        apns.eventLoopThreads = section.int("eventLoopThreads", in: 1...64)
        if let period = section.duration("tokenPeriod", max: .seconds(1800)) {
            if period < .seconds(30) {
                section.report(
                    section.error(
                        "tokenPeriod", section.node("tokenPeriod"),
                        "expected a duration from 30s to 30m (30m against APNs; shorter only for tests against a simulator with windows scaled alike)"
                    ))
            } else {
                apns.tokenPeriod = period
            }
        }
        if let interval = section.duration("credentialReloadInterval", allowZero: true, max: .seconds(600)) {
            apns.credentialReloadInterval = interval == .zero ? nil : interval
        }
        apns.connectionReplaceInterval =
            section.duration("connectionReplaceInterval", max: .seconds(600)) ?? apns.connectionReplaceInterval
        apns.caFile = section.string("caFile")
        apns.collapseIdFromEventId = section.bool("collapseIdFromEventId") ?? apns.collapseIdFromEventId
        if let proxy = section.string("proxy") {
            switch proxy {
            case "none": apns.proxy = .none
            case "environment": apns.proxy = .environment
            default:
                do {
                    apns.proxy = .url(try APNsProxy(url: proxy))
                } catch {
                    // The message never quotes the URL: it may carry a password.
                    section.report(
                        section.error(
                            "proxy", section.node("proxy"),
                            "\(error); expected none, environment or http://[user:password@]host[:port]"))
                }
            }
        }
        if var endpoints = section.section("endpoints") {
            apns.endpoints.production = decodeEndpoint(&endpoints, "production", apns.endpoints.production)
            apns.endpoints.development = decodeEndpoint(&endpoints, "development", apns.endpoints.development)
            endpoints.finish()
        }
        let items = section.required("credentials", section.list("credentials")) ?? []
        if items.isEmpty, let node = section.node("credentials") {
            section.report(section.error("credentials", node, "expected at least one credential"))
        }
        var names: Set<String> = []
        for (index, item) in items.enumerated() {
            let path = section.keyPath("credentials[\(index)]")
            let credential: ConfigSection
            do {
                credential = try ConfigSection(item, file: section.file, path: path, problems: section.problems)
            } catch {
                section.report(error)
                continue
            }
            var reading = credential
            guard var decoded = decodeCredential(&reading) else { continue }
            guard names.insert(decoded.name).inserted else {
                section.report(
                    reading.error("name", reading.node("name"), "duplicate credential name \"\(decoded.name)\""))
                continue
            }
            // Routing takes the first credential that matches: one whose every pattern an earlier
            // one claims is never used, and its events go with the other's key, silently.
            if let (earlier, pattern, by) = decoded.shadowed(by: apns.credentials) {
                section.report(
                    reading.error(
                        "topics", reading.node("topics"),
                        "credential \"\(decoded.name)\" can never be used: credential \"\(earlier)\" comes first and "
                            + "matches every topic it does (\"\(by)\" covers \"\(pattern)\"); move it above, or narrow "
                            + "\"\(earlier)\"'s topics"))
            }
            decoded.keyPath = path
            decoded.line = item.line
            apns.credentials.append(decoded)
        }
        section.finish()
        return apns
    }

    private static func decodeEndpoint(
        _ section: inout ConfigSection, _ key: String, _ defaults: APNsSettings.Endpoint
    ) -> APNsSettings.Endpoint {
        guard var endpoint = section.section(key) else { return defaults }
        let result = APNsSettings.Endpoint(
            host: endpoint.string("host") ?? defaults.host,
            port: endpoint.int("port", in: 1...65535) ?? defaults.port)
        endpoint.finish()
        return result
    }

    /// The credential, or `nil` when a problem leaves nothing to load (each problem recorded).
    private static func decodeCredential(_ section: inout ConfigSection) -> CredentialSettings? {
        let name = section.required("name", section.string("name"))
        let topics = section.required("topics", section.stringList("topics")) ?? []
        if topics.isEmpty, let node = section.node("topics") {
            section.report(section.error("topics", node, "expected at least one topic"))
        }
        for pattern in topics where !CredentialSettings.isValidPattern(pattern) {
            section.report(
                section.error(
                    "topics", section.node("topics"),
                    "\"\(pattern)\": expected an exact topic or a prefix ending in \".*\""))
        }
        let environment = section.choice("environment", APNsEnvironment.allCases)
        let token = section.section("token")
        let certificate = section.section("certificate")
        var kind: CredentialSettings.Kind?
        switch (token, certificate) {
        case (var token?, nil):
            kind = decodeToken(&token).map { .token($0) }
        case (nil, var certificate?):
            kind = decodeCertificate(&certificate).map { .certificate($0) }
        case (.some, .some):
            section.report(
                section.error(
                    "certificate", section.node("certificate"), "expected either token or certificate, not both"))
        case (nil, nil):
            if section.node("token") == nil, section.node("certificate") == nil {
                section.report(
                    section.error("token", nil, "expected a token or a certificate section", code: .missingKey))
            }
        }
        section.finish()
        guard let name, let kind else { return nil }
        return CredentialSettings(name: name, topics: topics, kind: kind, environment: environment)
    }

    private static func decodeToken(_ section: inout ConfigSection) -> TokenCredentialSettings? {
        let teamID = section.required("teamId", section.string("teamId"))
        var keyID: TokenCredentialSettings.KeyIDSource?
        switch (section.string("keyId"), section.string("keyIdFile")) {
        case (let id?, nil): keyID = .value(id)
        case (nil, let file?): keyID = .file(file)
        case (.some, .some):
            section.report(
                section.error("keyIdFile", section.node("keyIdFile"), "expected keyId or keyIdFile, not both"))
        case (nil, nil):
            if section.node("keyId") == nil, section.node("keyIdFile") == nil {
                section.report(
                    section.error(
                        "keyId", nil, "expected keyId (or keyIdFile, a file holding it beside the key)",
                        code: .missingKey))
            }
        }
        var key: TokenCredentialSettings.KeySource?
        switch (section.string("keyFile"), section.string("keyEnv")) {
        case (let file?, nil): key = .file(file)
        case (nil, let variable?): key = .environment(variable)
        case (.some, .some):
            section.report(section.error("keyEnv", section.node("keyEnv"), "expected keyFile or keyEnv, not both"))
        case (nil, nil):
            if section.node("keyFile") == nil, section.node("keyEnv") == nil {
                section.report(section.error("keyFile", nil, "expected keyFile or keyEnv", code: .missingKey))
            }
        }
        section.finish()
        guard let teamID, let keyID, let key else { return nil }
        return TokenCredentialSettings(teamID: teamID, keyID: keyID, key: key)
    }

    private static func decodeCertificate(_ section: inout ConfigSection) -> CertificateCredentialSettings? {
        let certificateFile = section.string("certificateFile")
        let privateKeyFile = section.string("privateKeyFile")
        let p12File = section.string("p12File")
        var source: CertificateCredentialSettings.Source?
        switch (certificateFile, privateKeyFile, p12File) {
        case (let certificate?, let key?, nil): source = .pem(certificateFile: certificate, privateKeyFile: key)
        case (nil, nil, let p12?): source = .pkcs12(file: p12)
        case (_?, nil, nil):
            if section.node("privateKeyFile") == nil {
                section.report(
                    section.error("privateKeyFile", nil, "required with certificateFile", code: .missingKey))
            }
        case (nil, _?, nil):
            if section.node("certificateFile") == nil {
                section.report(
                    section.error("certificateFile", nil, "required with privateKeyFile", code: .missingKey))
            }
        case (nil, nil, nil):
            if section.node("certificateFile") == nil, section.node("privateKeyFile") == nil,
                section.node("p12File") == nil
            {
                section.report(
                    section.error(
                        "certificateFile", nil, "expected certificateFile + privateKeyFile, or p12File",
                        code: .missingKey))
            }
        default:
            section.report(
                section.error(
                    "p12File", section.node("p12File"),
                    "expected certificateFile + privateKeyFile, or p12File, not both"))
        }
        let password = section.string("passwordEnv")
        section.finish()
        guard let source else { return nil }
        return CertificateCredentialSettings(source: source, passwordEnvironmentVariable: password)
    }
}
