import Foundation

/// A child process of this binary, talked to through its stdin (closing it says "stop") and stdout.
final class Child {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffered = Data()

    /// `wrapper`: a command line to run the child under (e.g. `perf record … --`), or empty.
    /// `environment`: variables the child gets on top of this process's (a scenario's own settings).
    init(_ arguments: [String], wrapper: [String] = [], environment: [String: String] = [:]) throws {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
        if let tool = wrapper.first {
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = Array(wrapper.dropFirst()) + [binary] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = arguments
        }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    /// The next line the child prints, without its newline; `nil` at end of output.
    func readLine() -> String? {
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeSubrange(...newline)
                return line
            }
            let more = output.fileHandleForReading.availableData
            if more.isEmpty { return nil }
            buffered.append(more)
        }
    }

    /// Closes its stdin (the child stops), returns what else it printed and waits for it to exit.
    func stop() -> [String] {
        try? input.fileHandleForWriting.close()
        var lines: [String] = []
        while let line = readLine() { lines.append(line) }
        process.waitUntilExit()
        return lines
    }
}
