import Foundation
import Threading

#if canImport(Glibc)
    import Glibc
#endif

private let spawnLock = NSLock()

/// Background programs (`spawnInBackground`) not reaped yet: killed when the test process exits.
///
/// A test stops what it started, but with an unstructured `Task` in its `defer`; after the last test
/// the process can exit before that task runs, and a broker it started (Tansu) then runs on with no
/// parent. `exit` runs this, so no test run leaves a program behind.
private let unreapedPrograms: Locked<Set<pid_t>> = {
    atexit { killUnreapedPrograms() }
    return Locked([])
}()

private func killUnreapedPrograms() {
    for pid in unreapedPrograms.withLock({ $0 }) { kill(pid, SIGKILL) }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later; Swift's Glibc module does
/// not import it), looked up once.
private let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
    guard let process = dlopen(nil, RTLD_NOW),
        let symbol = dlsym(process, "posix_spawn_file_actions_addclosefrom_np")
    else { return nil }
    return unsafeBitCast(
        symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()

/// The child gets standard input, output and error, nothing else of this process's. Not every
/// socket here is close-on-exec (NIO's and librdkafka's are not), and a long-lived child holding a
/// copy of one keeps that connection open after this process closes it: a broker started by one
/// test then kept another test's proxy connections to its broker open, and that broker, stopped
/// with SIGTERM, waited for them for ever.
private func closeTheRest(_ actions: inout posix_spawn_file_actions_t) {
    _ = addCloseFrom?(&actions, 3)
}

/// Spawn attributes that give the child every signal unblocked and at its default disposition.
/// posix_spawn otherwise passes on the calling thread's signal mask, and the threads that spawn here
/// (Swift concurrency's, NIO's) block nearly every signal: Tansu started from one never received
/// the SIGTERM sent to it (it stayed pending) and had to be killed.
private func withDefaultSignals<Result>(_ body: (UnsafePointer<posix_spawnattr_t>) -> Result) -> Result {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    return body(&attributes)
}

/// What a program spawned with `spawnAndWait` did.
package struct SpawnedProgram: Sendable {
    package var status: Int32
    package var stdout: String
    package var stderr: String
    /// It outlived its timeout and was killed (SIGKILL).
    package var timedOut: Bool
}

/// Runs `path` with `arguments` and waits for it, without Foundation's `Process`: on Linux (Swift
/// 6.3) `Process.run()` lists `/proc/self/fd` by copying whole 256-byte `d_name` fields out of
/// glibc's readdir buffer, reading past its end, and now and then crashes the test process with
/// SIGSEGV (fixed in swift-corelibs-foundation after 6.3.1). Tests that start many programs use this.
///
/// stdout and stderr are read as they come (no pipe can fill up and block the child); `stdin` is
/// written and closed. Past `timeout` seconds the child is killed.
package func spawnAndWait(
    _ path: String, _ arguments: [String], environment: [String: String]? = nil, stdin: [UInt8] = [],
    timeout: Double = 60
) throws -> SpawnedProgram {
    struct SpawnError: Error, CustomStringConvertible {
        let description: String
    }
    var outPipe: [Int32] = [0, 0]
    var errPipe: [Int32] = [0, 0]
    var inPipe: [Int32] = [0, 0]
    // Pipes made and the child spawned under one lock, each pipe end close-on-exec before any
    // other spawn can run: no child inherits another's pipe (a write end held by another child would
    // keep the reader from seeing its end). The child's dup2'd copies are not close-on-exec.
    spawnLock.lock()
    defer { spawnLock.unlock() }
    var made: [Int32] = []
    for index in 0..<3 {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            let reason = String(cString: strerror(errno))
            for fd in made { close(fd) }  // the pipes made before this one
            throw SpawnError(description: "pipe: \(reason)")
        }
        made += ends
        switch index {
        case 0: outPipe = ends
        case 1: errPipe = ends
        default: inPipe = ends
        }
    }
    for fd in outPipe + errPipe + inPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
    posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
    posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
    closeTheRest(&actions)

    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    let environmentPairs = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
    let envp = environmentPairs.map { strdup($0) } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid: pid_t = 0
    let spawned = withDefaultSignals { posix_spawn(&pid, path, &actions, $0, argv, envp) }
    close(inPipe[0])
    close(outPipe[1])
    close(errPipe[1])
    guard spawned == 0 else {
        close(inPipe[1])
        close(outPipe[0])
        close(errPipe[0])
        throw SpawnError(description: "posix_spawn \(path): \(String(cString: strerror(spawned)))")
    }
    if !stdin.isEmpty { _ = stdin.withUnsafeBytes { write(inPipe[1], $0.baseAddress, $0.count) } }
    close(inPipe[1])

    var out: [UInt8] = []
    var err: [UInt8] = []
    var open: [Int32: Bool] = [outPipe[0]: true, errPipe[0]: true]
    let deadline = Date().addingTimeInterval(timeout)
    var timedOut = false
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while open.values.contains(true) {
        if Date() > deadline {
            timedOut = true
            kill(pid, SIGKILL)
            break
        }
        var fds = open.filter(\.value).keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let ready = poll(&fds, nfds_t(fds.count), 100)
        if ready <= 0 { continue }
        for entry in fds where entry.revents != 0 {
            let count = read(entry.fd, &buffer, buffer.count)
            if count <= 0 {
                open[entry.fd] = false
            } else if entry.fd == outPipe[0] {
                out.append(contentsOf: buffer[0..<count])
            } else {
                err.append(contentsOf: buffer[0..<count])
            }
        }
    }
    close(outPipe[0])
    close(errPipe[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    // WIFEXITED / WEXITSTATUS, WTERMSIG: the exit code, or 128 + the signal as a shell reports it.
    let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return SpawnedProgram(
        status: exitCode, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self),
        timedOut: timedOut)
}

/// `spawnAndWait` for async code: the wait runs on a thread of its own (`onOwnThread`).
package func spawnAndAwait(
    _ path: String, _ arguments: [String], environment: [String: String]? = nil, stdin: [UInt8] = [],
    timeout: Double = 60
) async throws -> SpawnedProgram {
    try await onOwnThread {
        Result { try spawnAndWait(path, arguments, environment: environment, stdin: stdin, timeout: timeout) }
    }.get()
}

/// Runs `body`, a blocking wait (a program, a socket), on a thread of its own. Swift runs async code
/// on one cooperative thread per core, and a test that blocks on one of them (or a synchronous test
/// that does) holds it for as long: on a 2-core machine two such waits stop every other test in the
/// process, timing-sensitive ones included.
package func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}

/// A program started with `spawnInBackground`, still running or not: its stdout is collected as it
/// comes (stdin and stderr are /dev/null). Dropping it kills a program still running.
package final class BackgroundProgram: @unchecked Sendable {
    /// Bytes read so far; shared with the reading thread, which ends at the pipe's end of file.
    private final class Output: @unchecked Sendable {
        let lock = NSLock()
        var bytes: [UInt8] = []
    }

    package let pid: pid_t
    private let output = Output()
    private let lock = NSLock()
    private var exitCode: Int32?

    fileprivate init(pid: pid_t, stdout: Int32) {
        self.pid = pid
        unreapedPrograms.withLock { _ = $0.insert(pid) }
        let output = self.output
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(stdout, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                output.lock.withLock { output.bytes.append(contentsOf: buffer[0..<count]) }
            }
            close(stdout)
        }
    }

    /// Everything printed so far.
    package var stdout: String { output.lock.withLock { String(decoding: output.bytes, as: UTF8.self) } }

    /// The process id, as `kill` takes it.
    package var processIdentifier: pid_t { pid }

    /// Whether it has not exited yet (a stopped program is still running).
    package var isRunning: Bool { exitStatus() == nil }

    /// Waits for the program to exit and returns its exit code (128 + the signal when killed).
    @discardableResult
    package func waitUntilExit() -> Int32 {
        while true {
            if let status = exitStatus() { return status }
            usleep(10_000)
        }
    }

    /// Sends `signal` (SIGTERM by default) unless the program has been reaped.
    package func signal(_ signal: Int32 = SIGTERM) {
        lock.withLock {
            if exitCode == nil { _ = kill(pid, signal) }
        }
    }

    /// The exit code (128 + the signal for a killed program) once it has exited, reaping it; `nil`
    /// while it runs.
    /// SIGTERM, then SIGKILL if it has not exited within `grace`; returns once it has exited.
    package func terminate(grace: Duration = .seconds(5)) async {
        signal(SIGTERM)
        let deadline = ContinuousClock.now + grace
        while exitStatus() == nil, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if exitStatus() == nil {
            signal(SIGKILL)
            _ = waitUntilExit()
        }
    }

    package func exitStatus() -> Int32? {
        lock.withLock {
            if let exitCode { return exitCode }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            unreapedPrograms.withLock { _ = $0.remove(pid) }
            exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            return exitCode
        }
    }

    deinit {
        if exitCode == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            unreapedPrograms.withLock { _ = $0.remove(pid) }
        }
    }
}

/// Starts `path` with `arguments` and returns at once, without Foundation's `Process` (see
/// `spawnAndWait`), under the same lock so that no child inherits another's pipe. `environment` is
/// added to this process's (a name in both takes its value from `environment`).
/// `stderrFile`: where the program's standard error goes (a crash's backtrace, say), else /dev/null.
package func spawnInBackground(
    _ path: String, _ arguments: [String], environment: [String: String] = [:], stderrFile: String? = nil
) throws -> BackgroundProgram {
    struct SpawnError: Error, CustomStringConvertible {
        let description: String
    }
    var outPipe: [Int32] = [0, 0]
    spawnLock.lock()
    defer { spawnLock.unlock() }
    guard pipe(&outPipe) == 0 else { throw SpawnError(description: "pipe: \(String(cString: strerror(errno)))") }
    for fd in outPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
    posix_spawn_file_actions_addopen(
        &actions, 2, stderrFile ?? "/dev/null", stderrFile == nil ? O_WRONLY : O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    closeTheRest(&actions)
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid: pid_t = 0
    let spawned = withDefaultSignals { posix_spawn(&pid, path, &actions, $0, argv, envp) }
    close(outPipe[1])
    guard spawned == 0 else {
        close(outPipe[0])
        throw SpawnError(description: "posix_spawn \(path): \(String(cString: strerror(spawned)))")
    }
    return BackgroundProgram(pid: pid, stdout: outPipe[0])
}

/// A file's text (a program's log), or `nil` if it cannot be read. Read through a file handle:
/// `String(contentsOfFile:)` (Foundation's `readBytesFromFile`) left a 4 KiB buffer behind on some
/// of the reads of Tansu's log while the broker started, twelve in a `make asan` run of KafkaTests.
package func fileText(_ path: String) -> String? {
    guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
    defer { try? handle.close() }
    guard let data = try? handle.readToEnd() else { return "" }
    return String(decoding: data, as: UTF8.self)
}
