import Foundation
import Testing

/// `--help` as a user reads it: every option described, text wrapped by the parser rather than
/// by hand, and a usage error shown with the usage of the subcommand it is about.
@Suite("apns-worker help (the binary)", .timeLimit(.minutes(1)))
struct HelpTests {
    /// Every subcommand path: the top level's, and `channels`'s own.
    static func subcommands() throws -> [[String]] {
        func names(_ help: String) -> [String] {
            guard let start = help.range(of: "SUBCOMMANDS:\n") else { return [] }
            return help[start.upperBound...].split(separator: "\n").compactMap { line in
                guard line.hasPrefix("  "), !line.hasPrefix("   "), !line.contains("See '") else { return nil }
                return line.split(separator: " ").first.map(String.init)
            }
        }
        let top = try WorkerCommand().run(["--help"]).stdout
        var paths: [[String]] = []
        for name in names(top) {
            paths.append([name])
            let help = try WorkerCommand().run([name, "--help"]).stdout
            paths += names(help).map { [name, $0] }
        }
        return paths
    }

    // --team-id, --key-id, --topic, --priority, --collapse-id, --device-token and channels'
    // --channel-id had no description, and run --help's discussion broke lines mid-sentence.
    @Test("every subcommand's options are described, and its text is wrapped by the parser")
    func everyOptionDescribed() throws {
        let paths = try Self.subcommands()
        #expect(paths.contains(["send"]) && paths.contains(["channels", "get"]), "\(paths)")
        for path in paths {
            let help = try WorkerCommand().run(path + ["--help"], environment: ["COLUMNS": "80"]).stdout
            let lines = help.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            // Options: a flag line either carries its description, or the next line does.
            if let start = lines.firstIndex(of: "OPTIONS:") {
                for index in (start + 1)..<lines.count where lines[index].hasPrefix("  -") {
                    let line = lines[index]
                    // The parser puts a description at column 26, after the flag padded to it.
                    let characters = Array(line)
                    let described = characters.count > 26 && characters[25] == " " && characters[26] != " "
                    let next = index + 1 < lines.count ? lines[index + 1] : ""
                    let continued = next.hasPrefix(String(repeating: " ", count: 10))
                    #expect(described || continued, "\(path.joined(separator: " ")): \(line)")
                }
            }
            // Prose before USAGE: a line that ends a sentence or a paragraph may be short; one that
            // breaks mid-sentence far from the margin was wrapped by hand.
            let prose = lines.prefix { !$0.hasPrefix("USAGE:") }
            for (index, line) in prose.enumerated() where index + 1 < prose.count {
                let next = prose[index + 1]
                guard !line.isEmpty, !next.isEmpty, !line.hasSuffix("."), !line.hasSuffix(":") else { continue }
                let room = 80 - line.count
                let nextWord = next.split(separator: " ").first.map(\.count) ?? 0
                #expect(
                    room <= nextWord + 1, "\(path.joined(separator: " ")): hand-wrapped before \"\(next)\": \(line)")
            }
        }
    }

    // `apns-worker send` without arguments printed the top level's usage.
    @Test("a usage error shows the usage of the subcommand it is about, and exits 2")
    func subcommandUsage() throws {
        let send = try WorkerCommand().run(["send"])
        #expect(send.status == 2)
        #expect(send.stderr.contains("Usage: apns-worker send"), "\(send.stderr)")
        #expect(send.stderr.contains("See 'apns-worker send --help'"), "\(send.stderr)")
        let create = try WorkerCommand().run(["channels", "create"])
        #expect(create.status == 2)
        #expect(create.stderr.contains("Usage: apns-worker channels create"), "\(create.stderr)")
    }
}
