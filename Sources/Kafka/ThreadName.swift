import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Names the calling thread as the system shows it (`/proc/self/task/*/comm`, `top -H`, `ps -L`,
/// `perf`). Linux takes at most 15 bytes.
///
/// Written to `/proc/thread-self/comm` (what `pthread_setname_np` does, which Swift's Glibc module
/// does not export), not through `Thread.current.name`: Foundation on Linux does not apply a name
/// given before `start()`, and from inside the thread it applied the name only some of the time
/// (a CI run saw the producer's poll thread keep its pool name for 5 s).
func nameCurrentThread(_ name: String) {
    #if os(Linux)
        let descriptor = open("/proc/thread-self/comm", O_WRONLY)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    #else
        Thread.current.name = name
    #endif
}
