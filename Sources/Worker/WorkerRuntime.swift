import Dispatch
import Foundation
import Kafka
import Logging
import Prometheus
import ServiceLifecycle

/// Runs the worker as `apns-worker run` does: the pipeline and the operations endpoint in one
/// service group, until SIGTERM or SIGINT (graceful: drain, commit, leave the group). A second
/// signal exits at once.
package enum WorkerRuntime {
    /// The pieces, built from a configuration; `run()` runs them.
    package struct Assembly: Sendable {
        /// The pipeline of every input topic, or of the bulk lane's with `consumer.lanes`.
        package let pipeline: WorkerPipeline
        /// The urgent lane's pipeline (`consumer.lanes.urgent`): a group member of its own in the
        /// same group, with its own fetch queue, buffer, in-flight bound and producer, and APNs
        /// connections of its own on an event-loop thread of its own.
        package let urgent: WorkerPipeline?
        package let operations: OperationsServer
        /// Reads key and certificate files again (`apns.credentialReloadInterval`); `nil` when off
        /// or when no credential is read from a file.
        package let reloader: CredentialReloader?
        /// Posts the pipelines' spans (`tracing:`); `nil` when span export is off.
        package let spanExport: (any Service)?
        package let health: HealthState
        package let metrics: WorkerMetrics
        package let registry: PrometheusCollectorRegistry
        /// Sets the gauges read at scrape time (the APNs pools'); `/metrics` calls it before each answer.
        package let beforeScrape: @Sendable () -> Void
        package let logger: Logger

        package func run(handlingSignals: Bool = true) async throws {
            try await serviceGroup(handlingSignals: handlingSignals).run()
        }

        /// The service group `run` runs; `triggerGracefulShutdown()` on it stops the worker cleanly.
        package func serviceGroup(handlingSignals: Bool) -> ServiceGroup {
            ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    // The operations endpoint first: services stop in reverse order, so /metrics and
                    // /health keep answering while the pipeline drains; then span export, which sends
                    // the spans of the drain before it stops.
                    services: [.init(service: operations)] + (spanExport.map { [.init(service: $0)] } ?? [])
                        + (reloader.map { [.init(service: $0)] } ?? []) + [
                            .init(service: urgent.map { PipelineLanes([pipeline, $0]) as any Service } ?? pipeline)
                        ],
                    gracefulShutdownSignals: handlingSignals ? [.sigterm, .sigint] : [],
                    logger: logger))
        }
    }

    /// Builds everything a configuration describes. Keys and certificates are loaded here, so a bad
    /// file fails before anything connects. `spanExporter`: what exports spans when `tracing:` asks
    /// for them (`SpanExporter.otlp`, WorkerTelemetry); without one such a configuration is refused.
    package static func assemble(
        _ configuration: WorkerConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger, spanExporter: SpanExporter? = nil, onListening: (@Sendable (Int) -> Void)? = nil
    ) throws -> Assembly {
        if let refusal = KafkaLibrary.refusal() { throw UnsupportedLibrary(description: refusal) }
        logger.info(
            "apns-worker \(WorkerVersion.current) starting",
            metadata: [
                "version": "\(WorkerVersion.current)",
                "librdkafka": "\(KafkaLibrary.version)",
                // What `apns-worker check` prints, secrets redacted.
                "configuration": "\(ConfigurationCheck.summary(configuration).joined(separator: " | "))",
            ])
        let registry = PrometheusCollectorRegistry()
        let metrics = WorkerMetrics(registry: registry)
        // Liveness is progress: an event waiting out its longest backoff is not stuck, so the
        // window covers two of them (and a publish retry's 30 s ceiling).
        let health = HealthState(
            livenessWindow: max(.seconds(60), configuration.delivery.retry.maxBackoff * 2))
        let observer = OperationsObserver(metrics: metrics, health: health)
        // Every configured credential exports its gauge from the start (0 = healthy), so dashboards
        // and alerts see the series before anything goes wrong.
        for credential in configuration.apns.credentials { metrics.register(credential: credential.name) }
        let credentialNames = configuration.apns.credentials.map(\.name)
        health.configure(credentials: credentialNames)
        metrics.register(lane: .bulk, credentials: credentialNames)
        if configuration.consumer.urgent != nil { metrics.register(lane: .urgent, credentials: credentialNames) }
        metrics.register(publishTopics: [configuration.topics.results, configuration.topics.deadLetters])
        metrics.register(inputTopics: configuration.consumer.topics)
        // One authenticator per key for both lanes: each period's token is signed once.
        let authenticators = TokenAuthenticators(schedule: configuration.apns.tokenSchedule, logger: logger)
        let apnsSender = try APNsSender(
            settings: configuration.apns, environment: environment, authenticators: authenticators, logger: logger)
        var urgentLogger = logger
        urgentLogger[metadataKey: "lane"] = "urgent"
        // With lanes, the urgent lane has APNs connections of its own on an event-loop thread of its
        // own: its requests and answers do not queue behind the bulk lane's thousands on shared
        // event loops (docs/performance.md, "Lanes"). Each lane closes its own after its drain.
        let urgentSender = try configuration.consumer.urgent.map { lane in
            var apns = configuration.apns
            apns.eventLoopThreads = 1
            apns.connectionsPerCredential = lane.connectionsPerCredential
            return try APNsSender(
                settings: apns, environment: environment, authenticators: authenticators, logger: urgentLogger)
        }
        checkCertificates(
            apnsSender.certificateValidity, now: Date(), metrics: metrics, observer: observer, logger: logger)
        for credential in configuration.apns.credentials {
            for file in credential.privateKeyFiles where CredentialFiles.isReadableByOthers(file) {
                logger.warning(
                    "credential \(credential.name): \(file) is readable by every user of the machine: chmod 0400 (or 0440 with the group that runs the worker)",
                    metadata: ["credential": "\(credential.name)"])
            }
        }

        var pipelineConfiguration = PipelineConfiguration(
            inputTopics: configuration.consumer.bulkTopics, resultsTopic: configuration.topics.results,
            deadLetterTopic: configuration.topics.deadLetters)
        pipelineConfiguration.maxInFlight = configuration.delivery.maxInFlight
        pipelineConfiguration.maxInFlightBytes = configuration.delivery.maxInFlightBytes
        let credentials = configuration.apns.credentials.count
        pipelineConfiguration.maxInFlightPerCredential = configuration.delivery.credentialCap(
            bound: configuration.delivery.maxInFlight, credentials: credentials)
        pipelineConfiguration.maxParked = configuration.delivery.maxParked
        pipelineConfiguration.commitInterval = configuration.delivery.commitInterval
        pipelineConfiguration.revocationTimeout = configuration.delivery.revocationTimeout
        pipelineConfiguration.shutdownTimeout = configuration.delivery.shutdownTimeout
        pipelineConfiguration.retryPolicy = configuration.delivery.retry
        pipelineConfiguration.maxEventAge = configuration.delivery.maxEventAge
        pipelineConfiguration.maxRecordBytes = configuration.delivery.maxRecordBytes
        pipelineConfiguration.publishBlockedLimit = configuration.delivery.publishBlockedLimit
        pipelineConfiguration.progressTopic = configuration.delivery.progressTopic
        let spanExport = try SpanExporter.export(configuration.tracing, with: spanExporter, logger: logger)
        pipelineConfiguration.tracer = spanExport?.tracer
        pipelineConfiguration.traceParent = configuration.tracing.parent

        var consumer = configuration.kafkaConsumerConfiguration
        // Lag per partition, for apns_worker_consumer_lag.
        if consumer.statisticsInterval == nil { consumer.statisticsInterval = .seconds(10) }

        var decoder = NotificationEventDecoder.standard
        decoder.derivesCollapseIDs = configuration.apns.collapseIdFromEventId
        // With lanes, each pipeline reports into the shared metrics and health through a
        // `LaneObserver`, which combines what is a state of the whole worker.
        let tally = configuration.consumer.urgent.map { _ in LaneObserver.Tally(lanes: 2) }
        let pipeline = WorkerPipeline(
            configuration: pipelineConfiguration, consumer: consumer,
            producer: configuration.kafkaProducerConfiguration, sender: apnsSender, decoder: decoder,
            observer: tally.map { LaneObserver(base: observer, lane: 0, tally: $0) } ?? observer, logger: logger)
        let urgent = configuration.consumer.urgent.map { lane in
            var urgentConfiguration = pipelineConfiguration
            urgentConfiguration.inputTopics = lane.topics
            urgentConfiguration.maxInFlight = lane.maxInFlight
            urgentConfiguration.maxInFlightPerCredential = configuration.delivery.credentialCap(
                bound: lane.maxInFlight, credentials: credentials)
            urgentConfiguration.maxParked = configuration.delivery.parkedBound(forLaneOf: lane.maxInFlight)
            urgentConfiguration.urgent = true
            return WorkerPipeline(
                configuration: urgentConfiguration, consumer: Self.urgentMember(consumer),
                producer: Self.urgentMember(configuration.kafkaProducerConfiguration), sender: urgentSender!,
                decoder: decoder,
                observer: LaneObserver(
                    base: OperationsObserver(metrics: metrics, health: health, lane: .urgent), lane: 1, tally: tally!),
                logger: urgentLogger)
        }
        // With lanes, a credential's gauges count both lanes' connections.
        let senders = [apnsSender] + (urgentSender.map { [$0] } ?? [])
        let beforeScrape: @Sendable () -> Void = {
            for (credential, environment, statistics) in APNsSender.poolStatistics(of: senders) {
                metrics.setAPNsPool(credential: credential, environment: environment.rawValue, statistics)
            }
            metrics.setProviderTokens(of: authenticators)
            metrics.setClockJumps(authenticators.clockJumps)
        }
        let operations = OperationsServer(
            settings: configuration.http, health: health, registry: registry, logger: logger,
            beforeScrape: beforeScrape, onListening: onListening)
        let reloader = configuration.apns.credentialReloadInterval.map { interval in
            CredentialReloader(
                settings: configuration.apns, interval: interval, senders: senders, environment: environment,
                authenticators: authenticators, metrics: metrics, health: health, observer: observer, logger: logger)
        }.flatMap { $0.watchesAny ? $0 : nil }
        return Assembly(
            pipeline: pipeline, urgent: urgent, operations: operations, reloader: reloader,
            spanExport: spanExport?.service, health: health,
            metrics: metrics,
            registry: registry,
            beforeScrape: beforeScrape, logger: logger)
    }

    /// The urgent lane's consumer: the same group, named apart (`client.id`, and a static member's
    /// `group.instance.id`, which two members may not share).
    static func urgentMember(_ consumer: KafkaConsumerConfiguration) -> KafkaConsumerConfiguration {
        var consumer = consumer
        let effective = consumer.effective
        consumer.properties["client.id"] = nil
        consumer.clientID = effective.clientID + "-urgent"
        if let instance = effective.groupInstanceID { consumer.properties["group.instance.id"] = instance + "-urgent" }
        return consumer
    }

    /// The urgent lane's producer: its results do not queue behind the bulk lane's in librdkafka.
    static func urgentMember(_ producer: KafkaProducerConfiguration) -> KafkaProducerConfiguration {
        var producer = producer
        producer.clientID = (producer.properties.removeValue(forKey: "client.id") ?? producer.clientID) + "-urgent"
        return producer
    }

    /// Exports each certificate's expiry, and says at start what `check` says: a certificate
    /// expired or not yet valid marks its credential broken (its events are dead-lettered with reason
    /// `credentials`; the other credentials run on), one within `CertificateLifetime.warningWindow`
    /// of expiry is a warning.
    static func checkCertificates(
        _ certificates: [(credential: String, validity: ClosedRange<Date>)], now: Date, metrics: WorkerMetrics,
        observer: some PipelineObserver, logger: Logger
    ) {
        for (credential, validity) in certificates {
            metrics.setCredentialExpiry(credential, validity.upperBound)
            let state = CertificateLifetime(validity: validity, now: now)
            let metadata: Logger.Metadata = [
                "credential": "\(credential)", "notAfter": "\(validity.upperBound.formatted(.iso8601))",
            ]
            switch state {
            case .valid:
                logger.info("credential \(credential): \(state.sentence)", metadata: metadata)
            case .expiresSoon:
                logger.warning("credential \(credential): \(state.sentence)", metadata: metadata)
            case .expired, .notYetValid:
                logger.error(
                    "credential \(credential): \(state.sentence); its events go to the dead-letter topic (reason credentials) until it is replaced, the other credentials run on",
                    metadata: metadata)
                observer.credentialBroken(credential, reason: state.reason ?? "certificate")
            }
        }
    }

    /// A second SIGTERM or SIGINT while draining ends the process at once (exit 130), for an operator
    /// who does not want to wait. The first one is the service group's graceful shutdown.
    package static func exitOnSecondSignal() {
        let count = SignalCounter()
        for signalNumber in [SIGTERM, SIGINT] {
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                if count.increment() >= 2 {
                    FileHandle.standardError.write(Data("second signal: exiting now\n".utf8))
                    exit(130)
                }
            }
            source.resume()
            count.keep(source)
        }
    }
}

/// Signals seen, and the dispatch sources kept alive for the life of the process.
/// `@unchecked Sendable`: both fields are only touched under `lock`.
private final class SignalCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var seen = 0
    private var sources: [any DispatchSourceSignal] = []

    func increment() -> Int {
        lock.withLock {
            seen += 1
            return seen
        }
    }

    func keep(_ source: any DispatchSourceSignal) {
        lock.withLock { sources.append(source) }
    }
}

/// The librdkafka the process loaded is older than the worker supports.
package struct UnsupportedLibrary: Error, CustomStringConvertible {
    package let description: String
}
