import Foundation

/// Line output to stdout or stderr, unbuffered enough for pipes.
struct FileOutput: Sendable {
    let handle: FileHandle

    static let standardOutput = FileOutput(handle: .standardOutput)
    static let standardError = FileOutput(handle: .standardError)

    func write(_ text: String) {
        handle.write(Data(text.utf8))
    }
}
