import Threading
import CoreMetrics
import Prometheus

/// Installs the Prometheus factory as swift-metrics' global backend, so that metrics made by other
/// libraries (without an explicit factory) also reach `/metrics`.
package enum MetricsBootstrap {
    private static let done = Locked(false)

    /// Bootstraps `MetricsSystem` once per process; later calls do nothing and return `false`
    /// (`MetricsSystem.bootstrap` traps on a second call, which tests would hit).
    @discardableResult
    package static func bootstrap(registry: PrometheusCollectorRegistry) -> Bool {
        let first = done.withLock { done in
            defer { done = true }
            return !done
        }
        if first { MetricsSystem.bootstrap(WorkerMetrics.prometheusFactory(registry: registry)) }
        return first
    }
}
