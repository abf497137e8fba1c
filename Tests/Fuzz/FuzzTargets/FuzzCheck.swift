/// A property the code under test broke: a crash, which is what libFuzzer (and the corpus replay)
/// reports. The message says which property and shows the input's part that broke it.
package func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("fuzz property broken: \(message())") }
}

/// Text inputs with headers and a body, as the HTTP/2 targets read them: `name: value` lines up to
/// the first empty line, the rest the body. A name may start with `:` (`:path: /3/device/…`).
package struct HeaderLinesInput {
    package var headers: [(name: String, value: String)] = []
    package var body: [UInt8] = []

    package init(_ bytes: UnsafeBufferPointer<UInt8>) {
        var lineStart = 0
        var i = 0
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "\n") else {
                i += 1
                continue
            }
            if i == lineStart {
                body = Array(bytes[(i + 1)...])
                return
            }
            headers.append(Self.header(UnsafeBufferPointer(rebasing: bytes[lineStart..<i])))
            i += 1
            lineStart = i
        }
        if lineStart < bytes.count { headers.append(Self.header(UnsafeBufferPointer(rebasing: bytes[lineStart...]))) }
    }

    /// `name: value`; the separator is the first `: ` after the name's first byte. No separator: a
    /// name with an empty value.
    private static func header(_ line: UnsafeBufferPointer<UInt8>) -> (name: String, value: String) {
        var i = 1
        while i + 1 < line.count {
            if line[i] == UInt8(ascii: ":") && line[i + 1] == UInt8(ascii: " ") {
                return (
                    String(decoding: line[..<i], as: UTF8.self), String(decoding: line[(i + 2)...], as: UTF8.self)
                )
            }
            i += 1
        }
        return (String(decoding: line, as: UTF8.self), "")
    }
}
