import Foundation

/// Debian's `kcat` (an independent Kafka client), run on the librdkafka this process loaded: the
/// library the worker is built against (2.8.0 from `.build/librdkafka/prefix` when the system's is
/// older), found through `LD_LIBRARY_PATH`. Debian 12's kcat is linked against the system's
/// librdkafka 2.0.2, which misreads the tagged fields of Tansu's ApiVersions answer ("Protocol read
/// buffer underflow") and never gets past it; on the worker's library it reads Tansu as it is.
package enum Kcat {
    package static let path = "/usr/bin/kcat"

    /// The folder of the librdkafka.so this process loaded (nil when none is mapped), from the
    /// process's memory map.
    package static let libraryDirectory: String? = {
        let maps = fileText("/proc/self/maps") ?? ""
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let file = URL(fileURLWithPath: String(line[slash...]))
            if file.lastPathComponent.hasPrefix("librdkafka.so") { return file.deletingLastPathComponent().path }
        }
        return nil
    }()

    /// This process's environment with `libraryDirectory` first on `LD_LIBRARY_PATH`.
    package static var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        if let directory = libraryDirectory {
            let rest = environment["LD_LIBRARY_PATH"].map { ":" + $0 } ?? ""
            environment["LD_LIBRARY_PATH"] = directory + rest
        }
        return environment
    }

    /// Runs kcat with `arguments`, feeding `stdin` (posix_spawn, not Foundation's Process: see
    /// `spawnAndWait`).
    package static func run(_ arguments: [String], stdin: [UInt8] = [], timeout: Double = 60) throws -> SpawnedProgram {
        try spawnAndWait(path, arguments, environment: environment, stdin: stdin, timeout: timeout)
    }

    /// The librdkafka version kcat says it runs on (`kcat -V`: "... librdkafka 2.8.0 builtin...").
    package static func libraryVersion() throws -> String? {
        let output = try run(["-V"], timeout: 10).stdout
        guard let range = output.range(of: "librdkafka ") else { return nil }
        return String(output[range.upperBound...].prefix { !$0.isWhitespace })
    }
}
