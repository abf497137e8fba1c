import APNs
import Foundation
import Kafka
import Logging

/// What `apns-worker check` finds: the configuration loaded and checked as `run` would, each
/// credential's key or certificate opened, and the topics looked up on the broker when it answers;
/// a redacted summary for people; every problem. Nothing is consumed or produced.
package struct ConfigurationCheck: Sendable {
    /// The summary, one line per section, with every secret redacted.
    package var summary: [String] = []
    /// What stops `run` (exit 2 when not empty).
    package var problems: [String] = []
    /// What could not be checked (the broker did not answer), said but not a failure.
    package var notes: [String] = []
    /// What works today but needs doing soon (a certificate that expires within 30 days); not a
    /// failure.
    package var warnings: [String] = []

    package var isValid: Bool { problems.isEmpty }

    /// - Parameters:
    ///   - offline: check only the file: no broker, no key files, no secrets from the environment
    ///     (a configuration checked away from where it runs, as `deploy/check.py` does).
    ///   - brokerTimeout: how long the broker has to answer the metadata request.
    ///   - strict: for a deploy gate: a broker that does not answer (unreachable, a login or TLS
    ///     handshake refused) is a problem, not a note, a topic the worker produces to must be
    ///     able to take `acks=all` (`min.insync.replicas` at most its replication factor), and each
    ///     credential is proven against APNs (`probeAPNs`) unless `probesAPNs` is false.
    ///   - apnsTimeout: how long APNs has to answer each credential's probe.
    package static func run(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment, offline: Bool = false,
        brokerTimeout: Duration = .seconds(10), strict: Bool = false, probesAPNs: Bool = true,
        apnsTimeout: Duration = .seconds(10), now: Date = Date(), logger: Logger = Logger(label: "apns-worker.check")
    ) async -> ConfigurationCheck {
        var check = ConfigurationCheck()
        // Every problem at once: the file's, then each credential that could be read (even when
        // the file has other problems), then the broker (only for a file without any).
        let (read, fileProblems) = WorkerConfiguration.inspect(path: path, environment: environment)
        check.problems += fileProblems.map(\.description)
        guard let configuration = read else { return check }
        if fileProblems.isEmpty { check.summary = summary(configuration) }
        if configuration.tracing.isEnabled, let problem = OTLPEnvironment.problem(environment) {
            check.problems.append(problem)
        }
        guard !offline else {
            check.notes.append("offline: key files, secrets and the broker were not checked")
            return check
        }
        if let refusal = KafkaLibrary.refusal() { check.problems.append(refusal) }
        var opened: [CredentialSettings] = []
        for credential in configuration.apns.credentials {
            let loaded: APNsCredential
            do {
                loaded = try APNsSender.load(credential, environment: environment, namingCredential: false)
            } catch {
                check.problems.append("\(Self.location(of: credential, in: path)): \(error)")
                continue
            }
            if check.lookAtLifetime(credential, loaded, in: path, now: now) { opened.append(credential) }
            for file in credential.privateKeyFiles where CredentialFiles.isReadableByOthers(file) {
                check.warnings.append(
                    "\(Self.location(of: credential, in: path)): \(file) is readable by every user of the machine: "
                        + "chmod 0400 (or 0440 with the group that runs the worker)")
            }
        }
        guard fileProblems.isEmpty else {
            check.notes.append("the broker was not asked: fix the problems in the file first")
            return check
        }
        await check.lookUpTopics(
            configuration, file: path, environment: environment, timeout: brokerTimeout, strict: strict,
            logger: logger)
        if strict, probesAPNs {
            await check.probeAPNs(
                configuration, credentials: opened, file: path, environment: environment, timeout: apnsTimeout,
                logger: logger)
        } else if strict {
            check.notes.append("APNs was not asked: each credential was opened, not proven against APNs")
        }
        return check
    }

    /// Where `keyPath` is set: `worker.yaml:9`, or the `APNS_WORKER_*` variable that set it.
    static func place(of keyPath: [String], in file: String, environment: [String: String]) -> String {
        if let variable = environment.keys.sorted().first(where: {
            (try? EnvironmentOverrides.resolve($0))?.path == keyPath
        }) {
            return variable
        }
        guard let text = try? String(contentsOfFile: file, encoding: .utf8),
            let root = try? ConfigNode.parse(text, file: file), let line = root.line(at: keyPath)
        else { return file }
        return "\(file):\(line)"
    }

    /// `worker.yaml:14: apns.credentials[0] (shop)`: where a credential is written.
    static func location(of credential: CredentialSettings, in file: String) -> String {
        let place = credential.line.map { "\(file):\($0)" } ?? file
        return "\(place): \(credential.keyPath ?? "apns.credentials") (\(credential.name))"
    }

    /// A certificate's expiry in the summary; within 30 days a warning, outside its validity a problem.
    /// Whether the credential may be used now (a token key always).
    private mutating func lookAtLifetime(
        _ credential: CredentialSettings, _ loaded: APNsCredential, in file: String, now: Date
    ) -> Bool {
        guard case .certificate(let identity) = loaded else { return true }
        let location = Self.location(of: credential, in: file)
        guard let validity = identity.validity else {
            warnings.append("\(location): the certificate's validity dates could not be read")
            return true
        }
        let lifetime = CertificateLifetime(validity: validity, now: now)
        summary.append("certificate:  \(credential.name): \(lifetime.sentence)")
        switch lifetime {
        case .valid: return true
        case .expiresSoon:
            warnings.append("\(location): \(lifetime.sentence)")
            return true
        case .expired, .notYetValid:
            problems.append("\(location): \(lifetime.sentence)")
            return false
        }
    }

    /// Asks the broker for its topics: the input, results and dead-letter topics must exist.
    private mutating func lookUpTopics(
        _ configuration: WorkerConfiguration, file: String, environment: [String: String], timeout: Duration,
        strict: Bool, logger: Logger
    ) async {
        var quiet = logger
        quiet.logLevel = .critical  // librdkafka's own connection errors: the line below says why once
        let probe: KafkaClusterProbe
        do {
            probe = try KafkaClusterProbe(configuration: configuration.kafkaConsumerConfiguration, logger: quiet)
        } catch {
            problems.append("kafka: \(error)")
            return
        }
        let topics: [String: KafkaTopicDescription]
        switch await probe.topics(timeout: timeout) {
        case .success(let answered):
            topics = answered
        case .failure(let unanswered):
            let line =
                "broker \(configuration.bootstrapServers) did not answer in \(ConfigDuration.format(timeout)): \(unanswered.cause.message)"
            if strict {
                problems.append("\(line); \(Self.advice(for: unanswered))")
            } else {
                notes.append("\(line): topics not checked")
            }
            return
        }
        let wanted =
            configuration.consumer.topics.map { ("consumer.topics", $0) } + [
                ("topics.results", configuration.topics.results),
                ("topics.deadLetters", configuration.topics.deadLetters),
            ] + (configuration.delivery.progressTopic.map { [("delivery.progressTopic", $0)] } ?? [])
        for (key, topic) in wanted where topics[topic] == nil {
            let place = Self.place(of: key.split(separator: ".").map(String.init), in: file, environment: environment)
            problems.append(
                "\(place): \(key): topic '\(topic)' does not exist on \(configuration.bootstrapServers): create it, or correct the name"
            )
        }
        guard wanted.allSatisfy({ topics[$0.1] != nil }) else { return }
        summary.append("broker:       \(configuration.bootstrapServers) answered; every topic exists")
        if strict {
            // The worker produces with acks=all to these; it only reads the input topics.
            let produced = wanted.filter { $0.0 != "consumer.topics" }
            await checkReplication(produced, topics: topics, probe: probe, timeout: timeout)
            await checkGroupProtocol(
                configuration, file: file, environment: environment, timeout: timeout, logger: logger)
        }
        await probeCommitMetadata(configuration, file: file, environment: environment, timeout: timeout, logger: quiet)
    }

    /// What to look at when the broker did not answer, by what the client met.
    static func advice(for unanswered: KafkaClusterUnanswered) -> String {
        switch unanswered.obstacle {
        case .login:
            "check kafka.sasl.mechanisms, kafka.sasl.username and kafka.sasl.password (and that the user exists on the broker)"
        case .tls:
            "check kafka.ssl.ca.location (the CA that signed the broker's certificate), that the broker's certificate names the host in kafka.bootstrap.servers, and, where the broker asks for one, kafka.ssl.certificate.location and kafka.ssl.key.location"
        case .connection:
            "check kafka.bootstrap.servers and kafka.security.protocol, and that the broker can be reached from here"
        }
    }

    /// `min.insync.replicas` above a topic's replication factor makes every `acks=all` produce fail
    /// (`NOT_ENOUGH_REPLICAS`): the worker could never publish a result or a dead letter there.
    private mutating func checkReplication(
        _ produced: [(String, String)], topics: [String: KafkaTopicDescription], probe: KafkaClusterProbe,
        timeout: Duration
    ) async {
        let setting = "min.insync.replicas"
        let answered: [String: Result<[String: String], KafkaError>]
        do {
            answered = try await probe.configs(of: produced.map(\.1), names: [setting], timeout: timeout)
        } catch {
            notes.append("\(setting): could not check (the broker did not answer DescribeConfigs: \(error.message))")
            return
        }
        for (key, topic) in produced {
            guard let replication = topics[topic]?.replicationFactor else { continue }
            switch answered[topic] {
            case .success(let values):
                // Not set on the topic: the broker's default, which a broker reports as the value.
                guard let text = values[setting], let minimum = Int(text), minimum > replication else { continue }
                let replicas = replication == 1 ? "1 replica" : "\(replication) replicas"
                problems.append(
                    "\(key): topic '\(topic)' has \(setting) \(minimum) but \(replicas): every produce with acks=all (the worker's) fails; lower \(setting) to \(replication) or add replicas"
                )
            case .failure(let error):
                notes.append("\(setting): could not check topic '\(topic)' (\(error.message))")
            case nil:
                notes.append("\(setting): could not check topic '\(topic)' (the broker did not describe it)")
            }
        }
    }

    /// Under the next-generation group protocol, whether the broker speaks it (`KafkaGroupProtocolProbe`):
    /// where it does not, the worker would join and never be given a partition, without an error.
    private mutating func checkGroupProtocol(
        _ configuration: WorkerConfiguration, file: String, environment: [String: String], timeout: Duration,
        logger: Logger
    ) async {
        guard configuration.consumer.groupProtocol == .consumer else {
            summary.append("group:        classic protocol (every broker speaks it)")
            return
        }
        let group = KafkaGroupProtocolProbe.group(configuration.consumer.group)
        let place = Self.place(of: ["consumer", "groupProtocol"], in: file, environment: environment)
        do {
            switch try await KafkaGroupProtocolProbe.probe(
                configuration.kafkaConsumerConfiguration, topic: configuration.consumer.topics[0], timeout: timeout,
                logger: logger)
            {
            case .supported:
                summary.append(
                    "group:        next-generation protocol: the group coordinator answered ConsumerGroupHeartbeat (probe group \(group))"
                )
            case .unsupported:
                problems.append(
                    "\(place): consumer.groupProtocol: the broker's group coordinator does not speak the next-generation "
                        + "protocol (it sent no ConsumerGroupHeartbeat answer; the protocol needs Apache Kafka 4.0 or later): "
                        + "the worker would join and never be given a partition, without an error; set "
                        + "consumer.groupProtocol: classic, or upgrade the broker")
            case .undecided(let why):
                problems.append(
                    "\(place): consumer.groupProtocol: could not tell whether the broker speaks the next-generation "
                        + "protocol (\(why))")
            }
        } catch {
            problems.append("\(place): consumer.groupProtocol: the probe (group \(group)) could not start: \(error)")
        }
    }

    /// Does the broker give commit metadata back (`CommitMetadataProbe`, as every pipeline finds out
    /// at start)? Where it does not and no progress topic is set, `run` refuses to start: a problem.
    private mutating func probeCommitMetadata(
        _ configuration: WorkerConfiguration, file: String, environment: [String: String], timeout: Duration,
        logger: Logger
    ) async {
        let partition = KafkaTopicPartition(topic: configuration.consumer.topics[0], partition: 0)
        let kept: Bool
        do {
            kept = try await CommitMetadataProbe.keepsMetadata(
                configuration.kafkaConsumerConfiguration, partition: partition, timeout: timeout, logger: logger)
        } catch {
            notes.append(
                "commit metadata: could not probe with group \(CommitMetadataProbe.group(configuration.consumer.group)) (\(error)); \(CommitMetadataProbe.advice(for: error, progressTopic: configuration.delivery.progressTopic))"
            )
            return
        }
        if kept {
            summary.append(
                "progress:     the broker keeps commit metadata: what finishes above an event still waiting survives a crash or a hand-over"
            )
        } else if let topic = configuration.delivery.progressTopic {
            summary.append(
                "progress:     the broker drops commit metadata; what finishes above an event still waiting is kept in \(topic)"
            )
        } else {
            let place = Self.place(of: ["delivery"], in: file, environment: environment)
            problems.append("\(place): delivery.progressTopic: \(CommitMetadataProbe.refusal)")
        }
    }

    /// The configuration for people, secrets redacted (`run` logs the one-line form at start).
    static func summary(_ configuration: WorkerConfiguration) -> [String] {
        func properties(_ values: [String: String]) -> String {
            ConfigSecrets.redacted(values).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                .joined(separator: ", ")
        }
        var lines = [
            "kafka:        \(properties(configuration.kafka))",
            "consumer:     group \(configuration.consumer.group), topics \(configuration.consumer.topics.joined(separator: ", "))"
                + (configuration.consumer.urgent.map {
                    "; urgent lane \($0.topics.joined(separator: ", ")) (\($0.maxInFlight) in flight, "
                        + "\($0.connectionsPerCredential) APNs connection\($0.connectionsPerCredential == 1 ? "" : "s") "
                        + "per credential), bulk lane "
                        + configuration.consumer.bulkTopics.joined(separator: ", ")
                } ?? "")
                + (configuration.consumer.properties.isEmpty
                    ? "" : "; \(properties(configuration.consumer.properties))"),
            "producer:     delivery timeout \(ConfigDuration.format(configuration.producer.deliveryTimeout))"
                + (configuration.producer.properties.isEmpty
                    ? "" : "; \(properties(configuration.producer.properties))"),
            "topics:       results \(configuration.topics.results), dead letters \(configuration.topics.deadLetters)",
        ]
        let apns = configuration.apns
        lines.append(
            "apns:         production \(apns.endpoints.production.host):\(apns.endpoints.production.port), "
                + "development \(apns.endpoints.development.host):\(apns.endpoints.development.port); "
                + "\(apns.connectionsPerCredential) connections per credential, request timeout "
                + "\(ConfigDuration.format(apns.requestTimeout))" + (apns.caFile.map { ", extra CA \($0)" } ?? "")
                + {
                    switch apns.proxy {
                    case .none: return "; no proxy"
                    case .environment: return "; proxy from HTTPS_PROXY/NO_PROXY if set"
                    case .url(let proxy): return "; proxy \(proxy)"
                    }
                }())
        for credential in apns.credentials {
            let kind: String
            switch credential.kind {
            case .token(let token):
                let key: String
                switch token.key {
                case .file(let path): key = "key file \(path)"
                case .environment(let variable): key = "key from $\(variable)"
                }
                kind = "token (team \(token.teamID), key \(token.keyID), \(key))"
            case .certificate(let certificate):
                let source: String
                switch certificate.source {
                case .pem(let certificateFile, let keyFile): source = "\(certificateFile) + \(keyFile)"
                case .pkcs12(let file): source = file
                }
                kind =
                    "certificate (\(source)"
                    + (certificate.passwordEnvironmentVariable.map { ", password from $\($0)" } ?? "")
                    + ")"
            }
            lines.append(
                "credential:   \(credential.name): \(kind); topics \(credential.topics.joined(separator: ", ")); "
                    + "environment \(credential.environment?.rawValue ?? "both")")
        }
        let delivery = configuration.delivery
        lines.append(
            "delivery:     max in flight \(delivery.maxInFlight) events / \(delivery.maxInFlightBytes) bytes, "
                + "\(delivery.retry.maxAttempts) attempts within \(ConfigDuration.format(delivery.retry.maxRetryDuration)), "
                + "max event age \(delivery.maxEventAge.map(ConfigDuration.format) ?? "off"), "
                + "shutdown within \(ConfigDuration.format(delivery.shutdownTimeout))")
        lines.append("http:         \(configuration.http.host):\(configuration.http.port)")
        lines.append("logging:      \(configuration.logging.level), \(configuration.logging.format.rawValue)")
        let tracing = configuration.tracing
        lines.append(
            tracing.tracesURL.map {
                "tracing:      spans to \($0) (OTLP/HTTP), sampled \(tracing.sampleRatio) where the producer did not decide, "
                    + "parent \(tracing.parent.rawValue), service \(tracing.serviceName)"
            } ?? "tracing:      no spans (trace context carried into results and dead letters)")
        return lines
    }
}
