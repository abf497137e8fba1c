import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The conventional `process_*` metrics (as Prometheus' client libraries export them), read from
/// `/proc/self` at each scrape and appended to `/metrics`: resident and virtual memory, CPU
/// seconds, open and maximum file descriptors, threads and start time. Sizing (docs/deployment.md)
/// is written in resident memory, so it is watched on the worker's own series. Where `/proc` is
/// missing (not Linux) nothing is appended.
package enum ProcessMetrics {
    /// What `/proc/self` says now, or `nil` where it cannot be read.
    package struct Sample: Sendable, Equatable {
        package var residentBytes: Double
        package var virtualBytes: Double
        package var cpuSeconds: Double
        package var openFileDescriptors: Double
        package var maxFileDescriptors: Double?
        package var threads: Double
        package var startTimeSeconds: Double
    }

    package static func sample(procRoot: String = "/proc") -> Sample? {
        guard let stat = try? String(contentsOfFile: "\(procRoot)/self/stat", encoding: .utf8),
            let parsed = parseStat(stat),
            let uptime = try? String(contentsOfFile: "\(procRoot)/uptime", encoding: .utf8),
            let secondsSinceBoot = uptime.split(separator: " ").first.flatMap({ Double($0) })
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        let bootTime = Date().timeIntervalSince1970 - secondsSinceBoot
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "\(procRoot)/self/fd").count) ?? 0
        var limit = rlimit()
        let maxDescriptors = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Double(limit.rlim_cur) : nil
        return Sample(
            residentBytes: parsed.residentPages * pageSize, virtualBytes: parsed.virtualBytes,
            cpuSeconds: (parsed.userTicks + parsed.systemTicks) / ticks,
            openFileDescriptors: Double(descriptors), maxFileDescriptors: maxDescriptors, threads: parsed.threads,
            startTimeSeconds: bootTime + parsed.startTicks / ticks)
    }

    struct Stat: Equatable {
        var userTicks: Double
        var systemTicks: Double
        var threads: Double
        var startTicks: Double
        var virtualBytes: Double
        var residentPages: Double
    }

    /// `/proc/self/stat`: the fields after the command name (which is in parentheses and may hold
    /// spaces), numbered as proc(5) numbers them from 3 (state).
    static func parseStat(_ text: String) -> Stat? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): field n is fields[n - 3].
        func field(_ number: Int) -> Double? {
            let index = number - 3
            return index < fields.count ? Double(fields[index]) : nil
        }
        guard let user = field(14), let system = field(15), let threads = field(20), let start = field(22),
            let virtual = field(23), let resident = field(24)
        else { return nil }
        return Stat(
            userTicks: user, systemTicks: system, threads: threads, startTicks: start, virtualBytes: virtual,
            residentPages: resident)
    }

    /// The Prometheus text for a sample.
    package static func text(_ sample: Sample) -> String {
        var lines: [String] = []
        func add(_ name: String, _ type: String, _ help: String, _ value: Double) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
            let shown = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
            lines.append("\(name) \(shown)")
        }
        add(
            "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
            sample.cpuSeconds)
        add("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", sample.residentBytes)
        add("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", sample.virtualBytes)
        add("process_open_fds", "gauge", "Number of open file descriptors.", sample.openFileDescriptors)
        if let max = sample.maxFileDescriptors {
            add("process_max_fds", "gauge", "Maximum number of open file descriptors.", max)
        }
        add("process_threads", "gauge", "Number of OS threads in the process.", sample.threads)
        add(
            "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
            sample.startTimeSeconds)
        return lines.joined(separator: "\n") + "\n"
    }
}
