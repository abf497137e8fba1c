import ServiceLifecycle

/// A started simulator as a swift-service-lifecycle `Service`: it serves until graceful shutdown (or
/// cancellation), then closes its connections and event loops. Put it in the demo's `ServiceGroup`.
public struct APNsSimulatorService: Service {
    public let simulator: Simulator

    public init(_ simulator: Simulator) {
        self.simulator = simulator
    }

    public func run() async throws {
        // Returns on graceful shutdown; throws on cancellation. Either way the simulator stops.
        try? await gracefulShutdown()
        try await simulator.shutdown()
    }
}
