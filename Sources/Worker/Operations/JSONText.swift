/// JSON string escaping, shared by the health bodies and the JSON log handler.
package enum JSONText {
    /// `text` escaped for the inside of a JSON string: quote, backslash and every control
    /// character (U+0000–U+001F, plus U+007F for terminals' sake); the rest passes as UTF-8.
    static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    package static func quoted(_ text: String) -> String { "\"\(escape(text))\"" }
}
