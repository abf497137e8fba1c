import Foundation
import Threading

#if canImport(Glibc)
    import Glibc
#endif

/// One thread of its own that runs what it is given, in order, until stopped: for tests of what
/// happens on a given thread (which thread frees an object, which thread's bin it goes to).
///
/// `@unchecked Sendable`: `id` is written once, by the thread, before `started` is signalled, and
/// read only after `init` has waited for that signal; the queue is behind `lock`.
package final class TestThread: @unchecked Sendable {
    private let lock = NSLock()
    private var work: [@Sendable () -> Void] = []
    private var stopped = false
    private let ready = DispatchSemaphore(value: 0)
    private let started = DispatchSemaphore(value: 0)
    /// Set by the thread before `started` is signalled, read after.
    package private(set) nonisolated(unsafe) var id = pthread_t()

    package init() {
        let thread = Thread { [self] in
            id = pthread_self()
            started.signal()
            while true {
                ready.wait()
                let next = lock.withLock { stopped ? nil : work.removeFirst() }
                guard let next else { return }
                next()
            }
        }
        thread.start()
        started.wait()
    }

    /// Runs `body` on the thread and waits for it.
    package func run<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        lock.withLock {
            work.append {
                let value = body()
                result.withLock { $0 = value }
                done.signal()
            }
        }
        ready.signal()
        done.wait()
        return result.withLock { $0! }
    }

    /// Lets the thread end (its thread-specific storage is destroyed then).
    package func stop() {
        lock.withLock { stopped = true }
        ready.signal()
    }
}

/// Notes the thread that dropped its last reference.
package final class ReleaseMarker: Sendable {
    private let releasedOn: Locked<pthread_t?>

    package init() {
        releasedOn = Locked(nil)
    }

    /// The thread its `deinit` ran on, once it has run, goes to `releasedOn`: shared by every marker
    /// made with it, so that it can be read after the marker is gone.
    package init(reportingTo releasedOn: Locked<pthread_t?>) {
        self.releasedOn = releasedOn
    }

    deinit {
        let thread = pthread_self()
        releasedOn.withLock { $0 = thread }
    }
}
