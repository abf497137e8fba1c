#if FUZZING
    import Foundation

    @_silgen_name("LLVMFuzzerRunDriver")
    private func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt
#else
    import Foundation
#endif

/// The `main` of every fuzz executable.
///
/// In the fuzz build (`-sanitize=fuzzer,address -DFUZZING`) it hands over to libFuzzer with the
/// executable's `LLVMFuzzerTestOneInput` (SwiftPM links an executable's `main` to its module's own
/// entry point, so libFuzzer's `main` is not the one that runs). In a normal build it replays the
/// files, and the files in the directories, given as arguments: the corpus replayer.
package enum FuzzDriver {
    #if FUZZING
        package static func main(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
        }
    #else
        package static func main(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
            let arguments = CommandLine.arguments.dropFirst()
            guard !arguments.isEmpty else {
                print("usage: \(CommandLine.arguments[0]) FILE-OR-DIRECTORY...  (replays inputs; build with")
                print("       -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING to fuzz: `make fuzz`)")
                exit(2)
            }
            var count = 0
            for file in inputFiles(arguments) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    print("cannot read \(file)")
                    exit(1)
                }
                _ = data.withUnsafeBytes { testOneInput($0.bindMemory(to: UInt8.self).baseAddress, $0.count) }
                count += 1
            }
            print("replayed \(count) inputs")
            exit(0)
        }
    #endif

    /// The files named, and the regular files directly or deeper inside the directories named, sorted.
    package static func inputFiles(_ paths: some Sequence<String>) -> [String] {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            guard isDirectory.boolValue else {
                files.append(path)
                continue
            }
            let names = (FileManager.default.subpaths(atPath: path) ?? []).sorted()
            for name in names where !name.split(separator: "/").contains(where: { $0.hasPrefix(".") }) {
                let full = path + "/" + name
                var nested: ObjCBool = false
                if FileManager.default.fileExists(atPath: full, isDirectory: &nested), !nested.boolValue {
                    files.append(full)
                }
            }
        }
        return files
    }

    /// Runs `body` over `count` bytes at `data` (nil for an empty input).
    package static func withInput(
        _ data: UnsafePointer<UInt8>?, _ count: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Void
    ) {
        body(UnsafeBufferPointer(start: count == 0 ? nil : data, count: count))
    }
}
