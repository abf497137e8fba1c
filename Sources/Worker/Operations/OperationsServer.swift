import Threading
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle

/// The operations endpoint (`/metrics`, `/health/live`, `/health/ready`) as a `Service`: it binds
/// when run, serves until graceful shutdown (or cancellation), then closes its listening socket.
/// Requests in progress finish; the pipeline's own shutdown is what the process waits for.
///
/// Put it first in the `ServiceGroup`: services shut down in reverse order, so `/metrics` and
/// `/health/live` keep answering while the pipeline drains.
package struct OperationsServer: Service {
    package let host: String
    package let port: Int
    private let router: OperationsRouter
    private let logger: Logger
    private let group: any EventLoopGroup
    private let onListening: (@Sendable (Int) -> Void)?
    /// The listening socket once `listen()` bound it; `run()` serves on it.
    private let listener = Locked<(any Channel)?>(nil)
    private let connections: ConnectionTracker
    /// A kept-alive connection that sends nothing for this long between requests is closed (a
    /// scraper reconnects).
    private let idleTimeout: Duration
    /// A request must arrive whole within this time of its first byte (of the connection's start,
    /// for the first one), and its answer be written whole within this time.
    private let requestTimeout: Duration

    /// - Parameters:
    ///   - port: 0 picks a free port; `onListening` receives the real one once bound (and the caller
    ///     says it: without one, the port picked is logged whatever the log level).
    ///   - group: defaults to NIO's shared singleton group (no threads of its own to shut down).
    ///   - beforeScrape: runs before each `/metrics` answer, to set gauges read from elsewhere (the
    ///     APNs connection pools).
    package init(
        host: String, port: Int, health: HealthState, registry: PrometheusCollectorRegistry, logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        beforeScrape: @escaping @Sendable () -> Void = {},
        onListening: (@Sendable (Int) -> Void)? = nil,
        maxConnections: Int = 64, idleTimeout: Duration = .seconds(60), requestTimeout: Duration = .seconds(5)
    ) {
        self.connections = ConnectionTracker(limit: maxConnections)
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
        self.host = host
        self.port = port
        self.router = OperationsRouter(health: health, registry: registry, beforeScrape: beforeScrape)
        self.logger = logger
        self.group = group
        self.onListening = onListening
    }

    package init(
        settings: HTTPSettings, health: HealthState, registry: PrometheusCollectorRegistry, logger: Logger,
        beforeScrape: @escaping @Sendable () -> Void = {}, onListening: (@Sendable (Int) -> Void)? = nil
    ) {
        self.init(
            host: settings.host, port: settings.port, health: health, registry: registry, logger: logger,
            beforeScrape: beforeScrape, onListening: onListening)
    }

    /// Binds the listening socket now, so that a port in use or a host not on this machine fails
    /// the start (the caller exits 2 naming the setting) instead of a service that dies on its own
    /// while the rest of the worker runs on. `run()` binds if this was not called.
    /// Connections open now.
    package var openConnections: Int { connections.count }

    package func listen() async throws(OperationsServerError) {
        guard listener.withLock({ $0 }) == nil else { return }
        let channel: any Channel
        do {
            channel = try await bind(tracking: connections)
        } catch {
            throw OperationsServerError(host: host, port: port, underlying: "\(error)")
        }
        listener.withLock { $0 = channel }
    }

    package func run() async throws {
        try await listen()
        guard let listener = self.listener.withLock({ $0 }) else { return }
        let connections = self.connections
        let boundPort = listener.localAddress?.port ?? port
        // Said at notice; with `port: 0` the port was picked here and cannot be known any other
        // way, so it is said whatever the log level, unless the caller says it (`dev`'s banner).
        let level = port == 0 && onListening == nil ? max(.notice, logger.logLevel) : .notice
        logger.log(
            level: level,
            "operations endpoint listening on \(host):\(boundPort) (/health/live, /health/ready, /metrics)",
            metadata: ["host": "\(host)", "port": "\(boundPort)"])
        onListening?(boundPort)
        let stop: @Sendable () -> Void = {
            listener.close(promise: nil)
            connections.closeAll()
        }
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                try await listener.closeFuture.get()
            } onGracefulShutdown: {
                stop()
            }
        } onCancel: {
            stop()
        }
        logger.info("operations endpoint stopped")
    }

    private func bind(tracking connections: ConnectionTracker) async throws -> any Channel {
        let router = self.router
        let idle = TimeAmount(idleTimeout)
        let request = TimeAmount(requestTimeout)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // Requests here are a few hundred bytes. Small reads, one per turn of the loop, keep the
            // requests a pipelining client has buffered here (parsed, waiting their turn) to a few KB.
            .childChannelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 4096))
            .childChannelOption(.maxMessagesPerRead, value: 1)
            // The kernel's send buffer, fixed: left to Linux it grows to 4 MB a connection, a hundred
            // answers for a client that reads none, each rendered while the probes wait, and the pod's
            // memory is charged for them.
            .childChannelOption(.socketOption(.so_sndbuf), value: 64 * 1024)
            .childChannelInitializer { channel in
                connections.add(channel)
                return channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(
                        RequestDeadlineHandler(requestTimeout: request, idleTimeout: idle, tracker: connections))
                    // Reads nothing while answers wait to be written: a client that does not read them
                    // leaves its further requests in the kernel's buffers, not here.
                    try pipeline.addHandler(BackPressureHandler())
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(OperationsHTTPHandler(router: router))
                }
            }
            .bind(host: host, port: port)
            .get()
    }
}

/// The operations endpoint could not listen where `http.host` and `http.port` say.
package struct OperationsServerError: Error, CustomStringConvertible {
    package let host: String
    package let port: Int
    package let underlying: String

    package var description: String {
        "http.host/http.port: cannot listen on \(host):\(port): \(underlying)"
    }
}
