import Foundation
import FuzzSimulatorTarget
import FuzzTargets
import Testing

/// Every checked-in seed (Tests/Fuzz/corpus/<target>/) and every reproducer of a fixed finding
/// (Tests/Fuzz/regressions/<target>/) through its fuzz target's function, in the normal build: a
/// broken property or a crash fails the run. `make fuzz` explores further.
@Suite("Fuzz corpora replay")
struct FuzzCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()

    static let targets: [(name: String, run: @Sendable (UnsafeBufferPointer<UInt8>) -> Void)] = [
        ("FuzzJSON", FuzzJSON.run),
        ("FuzzEventDecoder", FuzzEventDecoder.run),
        ("FuzzConfiguration", FuzzConfiguration.run),
        ("FuzzSimulator", FuzzSimulator.run),
        ("FuzzAPNsResponse", FuzzAPNsResponse.run),
    ]

    static func inputs(_ target: String) -> [String] {
        FuzzDriver.inputFiles(["corpus", "regressions"].map { fuzzDirectory.path + "/\($0)/" + target })
    }

    @Test("replays the corpus and the regressions", arguments: targets.map(\.name))
    func replay(_ name: String) throws {
        let run = try #require(Self.targets.first { $0.name == name }).run
        let files = Self.inputs(name)
        #expect(files.count >= 5, "\(name) has \(files.count) seeds")
        for file in files {
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            data.withUnsafeBytes { run($0.bindMemory(to: UInt8.self)) }
        }
    }
}
