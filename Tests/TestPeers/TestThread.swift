import Foundation

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
        let result = ReleaseMarker.Box<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        lock.withLock {
            work.append {
                result.value = body()
                done.signal()
            }
        }
        ready.signal()
        done.wait()
        return result.value!
    }

    /// Lets the thread end (its thread-specific storage is destroyed then).
    package func stop() {
        lock.withLock { stopped = true }
        ready.signal()
    }
}

/// Notes the thread that dropped its last reference.
package final class ReleaseMarker: Sendable {
    private let releasedOn: Box<pthread_t?>

    package init() {
        releasedOn = Box(nil)
    }

    /// The thread its `deinit` ran on, once it has run; shared by every marker made from the same
    /// `Box`, so that it can be read after the marker is gone.
    package init(reportingTo releasedOn: Box<pthread_t?>) {
        self.releasedOn = releasedOn
    }

    deinit {
        releasedOn.value = pthread_self()
    }

    /// A value behind a lock.
    ///
    /// `@unchecked Sendable`: `stored` is only reached under `lock`.
    package final class Box<Value>: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: Value

        package init(_ value: Value) {
            stored = value
        }

        package var value: Value {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
    }
}
