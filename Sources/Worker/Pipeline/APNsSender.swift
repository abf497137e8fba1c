import Threading
import APNs
import Foundation
import Logging
import NIOCore
import NIOPosix

/// The pipeline's way to APNs: one `APNsClient` (its own connection pool) per (credential,
/// environment), the credential chosen by the notification's topic (a broadcast's bundle ID) as the configuration says
/// (first match wins). Keys and certificates are loaded at start, so a bad key file stops the
/// worker at once with a clear error; connections open on the first notification for that pair.
/// A credential reloaded from its files (`replaceCredential`, by `CredentialReloader`) is used by
/// new connections; those open move to it gradually.
/// A certificate outside its validity (expired, not yet valid) does not stop the worker: the
/// client refuses each of its notifications as `credentialsBroken`, and every other credential
/// runs on.
package final class APNsSender: NotificationSending {
    private struct Route: Sendable {
        let settings: CredentialSettings
    }

    private let settings: APNsSettings
    private let routes: [Route]
    /// Each route's credential now (as loaded at start, or reloaded since), by route index.
    private let credentials: Locked<[APNsCredential]>
    /// The files each credential was loaded from at start, by route index (none for `keyEnv`).
    package let loadedFiles: [CredentialFiles]
    private let group: MultiThreadedEventLoopGroup
    /// By (route index, environment): looked up for every notification, so no string key.
    private let clients = Locked<[ClientKey: APNsClient]>([:])

    private struct ClientKey: Hashable {
        var route: Int
        var environment: APNsEnvironment
    }
    private let logger: Logger
    /// For `HTTPS_PROXY` / `NO_PROXY` (the process environment in production).
    private let environment: [String: String]

    /// - Parameters:
    ///   - environment: where `keyEnv` / `passwordEnv` are read (the process environment by default).
    ///   - authenticators: where token keys' authenticators are shared (the lanes' senders share one).
    package init(
        settings: APNsSettings, environment: [String: String] = ProcessInfo.processInfo.environment,
        authenticators: TokenAuthenticators? = nil, logger: Logger = Logger(label: "apns-worker.apns")
    ) throws {
        self.settings = settings
        self.logger = logger
        self.environment = environment
        // A proxy the environment names wrongly is a configuration error at start, not at first send.
        for endpoint in [settings.endpoints.production, settings.endpoints.development] {
            _ = try settings.proxy(forHost: endpoint.host, environment: environment)
        }
        let authenticators = authenticators ?? TokenAuthenticators(schedule: settings.tokenSchedule)
        self.routes = settings.credentials.map { Route(settings: $0) }
        // Loaded from what was read, so that the reloader compares with exactly that. A file that
        // cannot be read is read again by `load`, which says why.
        let files = settings.credentials.map { (try? CredentialFiles.read($0)) ?? CredentialFiles([:]) }
        self.loadedFiles = files
        self.credentials = Locked(
            try zip(settings.credentials, files).map { settings, files in
                try Self.load(settings, environment: environment, authenticators: authenticators, files: files)
            })
        // Threads shared by every connection: I/O, TLS, HTTP/2, and the pipeline's handling of
        // each answer (classify, build the result, hand it to Kafka) run there.
        self.group = MultiThreadedEventLoopGroup(
            numberOfThreads: settings.eventLoopThreads ?? min(System.coreCount, 4))
    }

    /// Routes each request to its client (nearly always one), then hands each client its batch.
    package func send(_ requests: [NotificationRequest]) {
        let start = ContinuousClock.now
        var perClient = BatchesByDestination<APNsClient, APNsClient.BatchItem>(reserving: requests.count)
        // The previous request's route: a batch is nearly always one app's, and finding a route
        // takes the clients' lock and hashes its key.
        var last: (topic: String, environment: APNsEnvironment, client: APNsClient, credential: String)?
        for request in requests {
            let completion = request.completion
            let topic = request.push.topic
            let client: APNsClient
            let credential: String
            if let last, last.environment == request.environment, last.topic == topic {
                (client, credential) = (last.client, last.credential)
            } else {
                guard let found = route(topic, environment: request.environment, completion: completion) else {
                    continue
                }
                (client, credential) = found
                last = (topic, request.environment, client, credential)
            }
            let item = APNsClient.BatchItem(request.push) { result in
                completion(Self.attempt(result, credential: credential, since: start))
            }
            perClient.append(item, to: client)
        }
        for (client, items) in perClient.batches { client.send(items) }
    }

    /// Opens every credential's connections to the environment it serves (production for one that
    /// serves both, as events are by default), without waiting for them: the first notification
    /// then does not wait for the handshakes. A client that cannot be made is logged here and
    /// answered per request, as at a first send.
    package func connect() {
        for (index, route) in routes.enumerated() {
            do {
                try client(for: index, environment: route.settings.environment ?? .production).connect()
            } catch {
                logger.warning(
                    "cannot open connections for credential \(route.settings.name): \(error)",
                    metadata: ["credential": "\(route.settings.name)"])
            }
        }
    }

    /// The credential the first matching route names, as `route` chooses it.
    package func credential(forTopic topic: String, environment: APNsEnvironment) -> String? {
        routes.first { $0.settings.matches(topic: topic) && $0.settings.serves(environment) }?.settings.name
    }

    /// The client and credential name for a topic, or `nil` after answering `completion`
    /// with why there is none (no credential matches the topic; the client could not be made).
    private func route(
        _ topic: String, environment: APNsEnvironment, completion: @Sendable (SendAttempt) -> Void
    ) -> (APNsClient, String)? {
        guard
            let index = routes.firstIndex(where: {
                $0.settings.matches(topic: topic) && $0.settings.serves(environment)
            })
        else {
            let scoped = routes.contains { $0.settings.matches(topic: topic) }
            let error = APNsClientError(
                .noCredentialForTopic,
                "no configured credential matches topic \(topic)"
                    + (scoped ? " in the \(environment.rawValue) environment" : ""),
                mayHaveReachedAPNs: false)
            completion(
                SendAttempt(response: nil, error: error, outcome: .classify(error), credential: nil, duration: .zero))
            return nil
        }
        let credential = routes[index].settings.name
        do {
            return (try client(for: index, environment: environment), credential)
        } catch {
            completion(
                SendAttempt(
                    response: nil, error: error, outcome: .classify(error), credential: credential, duration: .zero))
            return nil
        }
    }

    private static func attempt(
        _ result: Result<APNsResponse, any Error>, credential: String, since start: ContinuousClock.Instant
    ) -> SendAttempt {
        let duration = ContinuousClock.now - start
        switch result {
        case .success(let response):
            return SendAttempt(
                response: response, error: nil, outcome: .classify(response), credential: credential,
                duration: duration)
        case .failure(let error):
            return SendAttempt(
                response: nil, error: error, outcome: .classify(error), credential: credential, duration: duration)
        }
    }

    /// Each certificate credential's validity (token keys do not expire), in configuration order.
    package var certificateValidity: [(credential: String, validity: ClosedRange<Date>)] {
        let credentials = self.credentials.withLock { $0 }
        return zip(routes, credentials).compactMap { route, credential in
            guard case .certificate(let identity) = credential, let validity = identity.validity else {
                return nil
            }
            return (route.settings.name, validity)
        }
    }

    /// The credential configuration entry `index` uses now.
    package func credential(at index: Int) -> APNsCredential {
        credentials.withLock { $0[index] }
    }

    /// The credential of configuration entry `index` is `credential` from now on (its files were
    /// reloaded): clients made from now on use it, and each existing client's new connections do,
    /// its open ones moving to it gradually (`APNsClient.replaceCredential`). All of this sender's
    /// clients switch, or (it throws) none.
    package func replaceCredential(at index: Int, with credential: APNsCredential) throws {
        switchCredential(try prepareCredential(credential, at: index))
    }

    /// A credential made ready for every client of one configuration entry: `switchCredential`
    /// then cannot fail.
    package struct PreparedCredential: Sendable {
        fileprivate let index: Int
        fileprivate let credential: APNsCredential
        fileprivate let clients: [ObjectIdentifier: APNsClient.CredentialReplacement]
    }

    /// Everything replacing entry `index`'s credential takes that can fail (each client's TLS
    /// context), done for every client there is now; nothing is switched. A caller switching
    /// several senders (the lanes') prepares each first and switches all or none.
    package func prepareCredential(_ credential: APNsCredential, at index: Int) throws -> PreparedCredential {
        let clients = self.clients.withLock { clients in clients.filter { $0.key.route == index }.map(\.value) }
        var prepared: [ObjectIdentifier: APNsClient.CredentialReplacement] = [:]
        for client in clients { prepared[ObjectIdentifier(client)] = try client.prepareReplacement(credential) }
        return PreparedCredential(index: index, credential: credential, clients: prepared)
    }

    /// Switches entry `index` to the prepared credential: new clients use it from now on, existing
    /// ones move to it. A client made between `prepareCredential` and this (a first notification
    /// for another environment) is replaced here, and one that cannot be is logged: it keeps the
    /// credential it was made with until the next reload.
    package func switchCredential(_ prepared: PreparedCredential) {
        credentials.withLock { $0[prepared.index] = prepared.credential }
        let clients = self.clients.withLock { clients in
            clients.filter { $0.key.route == prepared.index }.map(\.value)
        }
        for client in clients {
            if let replacement = prepared.clients[ObjectIdentifier(client)] {
                client.replaceCredential(with: replacement)
                continue
            }
            do {
                try client.replaceCredential(prepared.credential)
            } catch {
                let name = routes[prepared.index].settings.name
                logger.error(
                    "credential \(name): a client made during its reload cannot take the new credential (\(error)); it keeps the one before",
                    metadata: ["credential": "\(name)"])
            }
        }
    }

    /// Each client's pool as it is now: one per (credential, environment) that has sent something.
    package func poolStatistics() -> [(credential: String, environment: APNsEnvironment, APNsPoolStatistics)] {
        let clients = self.clients.withLock { $0 }
        return clients.map { key, client in (routes[key.route].settings.name, key.environment, client.statistics) }
            .sorted { ($0.credential, $0.environment.rawValue) < ($1.credential, $1.environment.rawValue) }
    }

    /// Several senders' pools (the lanes' own) summed per (credential, environment), in the order
    /// `poolStatistics()` gives them.
    package static func poolStatistics(
        of senders: [APNsSender]
    ) -> [(credential: String, environment: APNsEnvironment, APNsPoolStatistics)] {
        combined(senders.map { $0.poolStatistics() })
    }

    static func combined(
        _ pools: [[(credential: String, environment: APNsEnvironment, APNsPoolStatistics)]]
    ) -> [(credential: String, environment: APNsEnvironment, APNsPoolStatistics)] {
        var sums: [String: [APNsEnvironment: APNsPoolStatistics]] = [:]
        for (credential, environment, statistics) in pools.joined() {
            sums[credential, default: [:]][environment] =
                (sums[credential]?[environment] ?? APNsPoolStatistics()) + statistics
        }
        return sums.flatMap { credential, byEnvironment in
            byEnvironment.map { (credential, $0.key, $0.value) }
        }.sorted { ($0.credential, $0.environment.rawValue) < ($1.credential, $1.environment.rawValue) }
    }

    package func shutdown() async {
        let all = clients.withLock { clients in
            defer { clients = [:] }
            return Array(clients.values)
        }
        for client in all { await client.shutdown() }
        try? await group.shutdownGracefully()
    }

    private func client(for index: Int, environment: APNsEnvironment) throws -> APNsClient {
        let route = routes[index]
        let key = ClientKey(route: index, environment: environment)
        return try clients.withLock { clients in
            if let client = clients[key] { return client }
            let endpoint = environment == .production ? settings.endpoints.production : settings.endpoints.development
            var configuration = APNsClientConfiguration(
                environment: environment, host: endpoint.host, port: endpoint.port,
                tls: APNsTLSConfiguration(trust: settings.tlsTrust))
            configuration.connectionsPerCredential = settings.connectionsPerCredential
            configuration.requestTimeout = settings.requestTimeout
            configuration.proxy = try settings.proxy(forHost: endpoint.host, environment: self.environment)
            configuration.replaceInterval = settings.connectionReplaceInterval
            // Read under the clients' lock, which `replaceCredential` takes after changing it (never
            // both at once): a client made now has the credential that is current, or is among
            // those it replaces.
            let credential = credentials.withLock { $0[index] }
            // Every line the client and its pool log (connections opened, replaced after a reload,
            // retired) names the credential and environment it is for.
            var clientLogger = logger
            clientLogger[metadataKey: "credential"] = "\(route.settings.name)"
            clientLogger[metadataKey: "environment"] = "\(environment.rawValue)"
            let client = try APNsClient(
                configuration: configuration, credential: credential, eventLoopGroup: group,
                logger: clientLogger)
            clients[key] = client
            let via = configuration.proxy.map { " via proxy \($0)" } ?? ""
            logger.info(
                "APNs client for credential \(route.settings.name) (\(environment.rawValue)) at \(endpoint.host):\(endpoint.port)\(via)",
                metadata: ["credential": "\(route.settings.name)", "environment": "\(environment.rawValue)"])
            return client
        }
    }
}
