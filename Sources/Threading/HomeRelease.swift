import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Drops the last reference to an object on the thread that allocated it, not on the thread where
/// its work ended.
///
/// A produced record's delivery context (the caller's completion and all it captured: the record,
/// the caller's result, its bookkeeping) is allocated by the sending thread, and its work ends on
/// the producer's poll thread. glibc's `free` gives a block that another thread allocated back to
/// that thread's arena under the arena's lock, while the sending thread allocates from the same arena
/// under the same lock: at tens of thousands of records a second the two threads met on that lock
/// for nearly every record, and each meeting is a futex sleep and wake (Benchmarks/archive/2026-11.md,
/// "Freeing where it was allocated").
///
/// So the poll thread runs the completion and then puts the context in its sender's bin, and the
/// sender empties its own bin the next time it sends (`releaseHere`): the blocks go back to its own
/// cache and arena, a batch at a time, without meeting anyone. The worker does the same with an
/// event, which is decoded on the reading thread and ends on an APNs event loop.
///
/// Other code puts an object in a bin only for a thread that empties its own (`attendedHere`): a
/// thread that has called `releaseHere`. The APNs client does so with the requests a worker's reader
/// hands it, which are freed on an event loop otherwise.
///
/// A thread that stops sending would keep what is in its bin: once a second a producer's poll thread
/// empties every bin that has waited a second or more (`sweep`), a producer that stops empties the
/// bins its contexts went to, and a thread's bin is emptied when the thread ends. An object outlives
/// its work by about two seconds at most while a producer runs, and no delivery context outlives its
/// producer's `close`.
package enum HomeRelease {
    /// One thread's objects whose work has ended, waiting for that thread to release them.
    ///
    /// Two locks: `pending` is what other threads append to (held for an append); `emptying`
    /// serializes the threads that may empty a bin (its own, a sweep, its thread's exit) so that
    /// `spare`, the storage swapped in and out, is reused rather than reallocated for every batch.
    ///
    /// `@unchecked Sendable`: `spare` is touched only with `emptying` held; `pending` is a `Locked`;
    /// `attended` is read and written only by the bin's own thread (`releaseHere`, `attendedHere`).
    package final class Bin: @unchecked Sendable {
        private struct Pending {
            var objects: [Unmanaged<AnyObject>] = []
            /// When the first of `objects` was put: a sweep takes only bins left waiting.
            var since: ContinuousClock.Instant?
            /// False once its thread has ended: nothing would empty it any more.
            var open = true
        }

        private let pending = Locked(Pending())
        private let emptying = NSLock()
        private var spare: [Unmanaged<AnyObject>] = []
        /// Its thread has emptied it (`releaseHere`), so it will again. Read and written by that
        /// thread only.
        fileprivate var attended = false

        /// Takes over one retain of `object`: released by this bin's thread when it empties the bin
        /// (or by a sweep), or here at once if that thread has ended.
        package func put(_ object: Unmanaged<AnyObject>) {
            let kept = pending.withLock { pending in
                guard pending.open else { return false }
                if pending.objects.isEmpty { pending.since = .now }
                pending.objects.append(object)
                return true
            }
            if !kept { object.release() }
        }

        /// Releases everything put here so far, on the calling thread; with `deadline`, only if the
        /// first of it was put before then.
        package func empty(putBefore deadline: ContinuousClock.Instant? = nil) {
            emptying.lock()
            defer { emptying.unlock() }
            pending.withLock { pending in
                guard let since = pending.since else { return }
                if let deadline, since >= deadline { return }
                swap(&pending.objects, &spare)
                pending.since = nil
            }
            guard !spare.isEmpty else { return }
            for object in spare { object.release() }
            spare.removeAll(keepingCapacity: true)
        }

        /// Its thread is ending: releases what it holds, and from now on `put` releases at once.
        fileprivate func close() {
            pending.withLock { $0.open = false }
            empty()
        }
    }

    /// Every live thread's bin, for `sweep`.
    private static let bins = Locked<[ObjectIdentifier: Bin]>([:])

    /// The calling thread's bin, in thread-specific storage that retains it; on the thread's exit the
    /// bin is emptied and dropped.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let created = pthread_key_create(&key) { raw in
            guard let raw else { return }
            let bin = Unmanaged<Bin>.fromOpaque(raw).takeRetainedValue()
            HomeRelease.bins.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(bin)) }
            bin.close()
        }
        precondition(created == 0, "pthread_key_create failed (\(created)): out of thread-specific keys")
        return key
    }()

    /// The bin of the calling thread: where what it allocates goes once its work has ended elsewhere.
    package static var here: Bin {
        if let raw = pthread_getspecific(key) {
            return Unmanaged<Bin>.fromOpaque(raw).takeUnretainedValue()
        }
        let bin = Bin()
        bins.withLock { $0[ObjectIdentifier(bin)] = bin }
        pthread_setspecific(key, Unmanaged.passRetained(bin).toOpaque())
        return bin
    }

    /// Releases what the calling thread's bin holds: a producer calls it before each send, the
    /// worker's reader before each batch. From then on the thread counts as one that empties its bin
    /// (`attendedHere`).
    package static func releaseHere() {
        let bin = here
        bin.attended = true
        bin.empty()
    }

    /// The calling thread's bin if the thread empties it (it has called `releaseHere`), else `nil`:
    /// for code that may run on any thread, whose objects should go home only where someone will
    /// release them. A thread that never empties its bin would keep them until a sweep, and a
    /// process without a Kafka producer has no sweeps.
    package static var attendedHere: Bin? {
        guard let raw = pthread_getspecific(key) else { return nil }
        let bin = Unmanaged<Bin>.fromOpaque(raw).takeUnretainedValue()
        return bin.attended ? bin : nil
    }

    /// Empties, on the calling thread, every bin that has waited `age` or longer for its thread: a
    /// busy thread's bin is left to it.
    package static func sweep(olderThan age: Duration) {
        let deadline = ContinuousClock.now - age
        let all = bins.withLock { Array($0.values) }
        for bin in all { bin.empty(putBefore: deadline) }
    }

    /// The bins one producer's delivery contexts went to, noted by its poll thread: emptied when the
    /// producer stops, so that nothing a closed producer's callbacks captured outlives it.
    package final class Homes: Sendable {
        private let bins = Locked<(last: ObjectIdentifier?, all: [ObjectIdentifier: Bin])>((nil, [:]))

        package init() {}

        package func note(_ bin: Bin) {
            let id = ObjectIdentifier(bin)
            bins.withLock { bins in
                guard bins.last != id else { return }  // the last report's sender: nearly always
                bins.last = id
                bins.all[id] = bin
            }
        }

        package func empty() {
            for bin in bins.withLock({ Array($0.all.values) }) { bin.empty() }
        }
    }

    /// How often a producer's poll thread sweeps.
    package static let sweepInterval: Duration = .seconds(1)
}
