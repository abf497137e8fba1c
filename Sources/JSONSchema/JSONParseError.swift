/// Why a document is not JSON, and where: a byte offset plus the 1-based line and column
/// (in Unicode scalars) a person can find in an editor.
package struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    package let message: String
    package let offset: Int
    package let line: Int
    package let column: Int

    package var description: String { "line \(line), column \(column): \(message)" }

    init(_ message: String, at offset: Int, in bytes: UnsafeBufferPointer<UInt8>) {
        self.message = message
        self.offset = offset
        var line = 1
        var column = 1
        var i = 0
        let end = min(offset, bytes.count)
        while i < end {
            let b = bytes[i]
            if b == 0x0A {
                line += 1
                column = 1
            } else if b & 0xC0 != 0x80 {
                column += 1
            }
            i += 1
        }
        self.line = line
        self.column = column
    }
}
