import Foundation

/// A value behind a lock: the Kafka state machines' home, and `HomeRelease`'s bins.
///
/// Not `Synchronization.Mutex`: on Linux that is built on raw futexes inside the (uninstrumented)
/// standard library, so ThreadSanitizer cannot see it and reports every access it protects as a
/// race. `NSLock` is a `pthread_mutex_t`, which TSan intercepts, at the same cost.
///
/// `@unchecked Sendable`: `value` is only reached inside `withLock`, under `lock`.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
