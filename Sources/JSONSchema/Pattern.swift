/// A `pattern` / `patternProperties` regular expression: ECMA-262 syntax run on Swift's `Regex`.
///
/// The source is translated where the two dialects disagree on the same text (see
/// docs/json-schema.md, "Regular expressions", for what remains different):
/// - `$` outside a class means end of input in ECMA-262, not "before a final newline": → `\z`.
/// - Escapes that are plain letters in ECMA-262 but anchors or classes in Swift (`\Z`, `\A`, `\h`…)
///   become the letter; `\v` is the vertical tab.
/// - `\d` and `\w` (and so `\b`) are ASCII-only in ECMA-262.
/// - Matching works on Unicode scalars, not grapheme clusters, so `.` and classes see code points.
/// Matches are searches (unanchored), as JSON Schema requires.
///
/// `@unchecked Sendable`: `Regex` is an immutable value once built; its lazily lowered program is
/// published atomically by the standard library, so sharing one across threads only reads.
///
/// A class: a check reads it through one reference, where a struct was copied with a retain and a
/// release of each of its parts (the source, the program's arrays, the `Regex`) for every check.
final class Pattern: @unchecked Sendable {
    let source: String
    /// The fast engine, when the pattern is in its subset (nearly always).
    let own: ECMARegex?
    /// Swift's engine: for lookaround and backreferences, and for inputs too large for `own`'s state
    /// set. Nil when Swift's syntax rejects a pattern `own` handles (`[^]`, `[\d-z]`).
    let regex: Regex<AnyRegexOutput>?

    init(_ source: String) throws(SchemaError) {
        self.source = source
        var ownIssue: RegexSyntaxIssue?
        do {
            own = try ECMARegex(source)
        } catch {
            own = nil
            ownIssue = error
        }
        if case .invalid(let reason)? = ownIssue {
            throw SchemaError("invalid regular expression '\(source)': \(reason)")
        }
        do {
            regex = try Regex(Self.translate(source))
                .matchingSemantics(.unicodeScalar)
                .asciiOnlyDigits()
                .asciiOnlyWordCharacters()
        } catch {
            guard own != nil else { throw SchemaError("invalid regular expression '\(source)': \(error)") }
            regex = nil
        }
    }

    func matches(_ string: String) -> Bool {
        if let own {
            if let verdict = own.matches(
                string, maxStateBits: regex == nil ? ECMARegex.maxStateBitsWithoutFallback : ECMARegex.maxStateBits)
            {
                return verdict
            }
        }
        guard let regex else { return false }
        return (try? regex.firstMatch(in: string)) != nil
    }

    /// Whether `source` is an ECMA-262 regular expression as the `regex` format means it (u-flag
    /// rules): no letter escapes beyond ECMA-262's own (`\Z`, `\A`, `\z` are other dialects), and
    /// it compiles.
    static func isECMAScript(_ source: String) -> Bool {
        let allowedLetters = Set("dDwWsSbBfnrtvcxukpP")
        var escaped = false
        for c in source {
            if escaped {
                if c.isASCII && c.isLetter && !allowedLetters.contains(c) { return false }
                escaped = false
            } else if c == "\\" {
                escaped = true
            }
        }
        return !escaped && (try? Pattern(source)) != nil
    }

    /// Escapes that are anchors or classes in Swift's syntax but plain letters (identity escapes) or
    /// something else in ECMA-262.
    static let identityEscapes: [Character: String] = [
        "A": "A", "Z": "Z", "z": "z", "G": "G", "h": "h", "H": "H", "R": "R", "N": "N", "K": "K", "X": "X",
        "O": "O", "y": "y", "Y": "Y", "V": "V", "v": "\\x{0B}",
    ]

    /// Rewrites the ECMA-262 constructs whose meaning differs in Swift's regex syntax.
    static func translate(_ source: String) -> String {
        var out = ""
        var inClass = false
        var escaped = false
        for c in source {
            if escaped {
                escaped = false
                if let identity = Self.identityEscapes[c] {
                    // ECMA-262 (without the u flag) reads `\Z` as a plain `Z`; Swift as an anchor.
                    out.removeLast()
                    out += identity
                } else {
                    out.append(c)
                }
                continue
            }
            switch c {
            case "\\":
                escaped = true
                out.append(c)
            case "[" where !inClass:
                inClass = true
                out.append(c)
            case "]" where inClass:
                inClass = false
                out.append(c)
            case "$" where !inClass:
                out += "\\z"
            default:
                out.append(c)
            }
        }
        return out
    }
}
