@testable import JSONSchema
import Testing

@Suite("patterns: the ECMA-262 engine")
struct PatternTests {
    @Test(
        "matches as ECMA-262 does",
        arguments: [
            ("^([0-9A-Fa-f]{2})+$", "ab12", true), ("^([0-9A-Fa-f]{2})+$", "abc", false),
            ("^([0-9A-Fa-f]{2})+$", "", false),
            ("^[^.].*\\.voip$", "com.x.voip", true), ("^[^.].*\\.voip$", "com.x.voipx", false),
            ("^[^.].*\\.voip$", "com.x.voip\n", false), ("^[^.].*\\.voip$", ".voip", false),
            ("a|b|c", "xbx", true), ("^a*?b", "aaab", true), ("(a|ab)(c|bcd)(d*)", "abcd", true),
            ("^(a+)+$", String(repeating: "a", count: 40) + "!", false),
            ("(a*)*b", String(repeating: "a", count: 40) + "c", false),
            ("^\\d{3}-\\d{4}$", "555-1234", true), ("^\\d{3}-\\d{4}$", "٣٣٣-1234", false),
            ("[^a-z]", "abc", false), ("[^a-z]", "abC", true),
            ("\\bfoo\\b", "a foo b", true), ("\\bfoo\\b", "afoob", false), ("\\Bfoo", "afoo", true),
            ("^x{2,3}$", "xx", true), ("^x{2,3}$", "x", false), ("^x{2,3}$", "xxxx", false), ("^x{2,}$", "xxxxx", true),
            ("a{,3}", "a{,3}", true), ("a{,3}", "aaa", false),
            ("^.$", "é", true), ("^.$", "\n", false), ("^.$", "😀", true),
            ("[\\d-z]", "-", true), ("[\\d-z]", "5", true), ("[\\d-z]", "y", false),
            ("\\u00e9", "café", true), ("^\\x41$", "A", true), ("^\\cJ$", "\n", true),
            ("^\\s+$", "\u{00A0} \t\u{FEFF}", true), ("^\\S+$", "a b", false),
            ("^(?:ab)+$", "abab", true), ("^(?<year>\\d{4})$", "2026", true),
            ("", "anything", true), ("^$", "", true), ("^$", "x", false),
            ("[]", "a", false), ("[^]", "a", true), ("^[\\w]+$", "snake_case9", true), ("^\\W$", "é", true),
            ("^\\Z$", "Z", true),
        ] as [(String, String, Bool)])
    func ownEngine(pattern: String, input: String, expected: Bool) throws {
        let regex = try ECMARegex(pattern)
        #expect(regex.matches(input) == expected)
        #expect(try Pattern(pattern).matches(input) == expected)
    }

    @Test(
        "lookaround and backreferences go to Swift's Regex",
        arguments: [
            ("^(?=a)ab", "ab", true), ("^(?=a)ab", "b", false), ("(a)\\1", "aa", true), ("(a)\\1", "ab", false),
            ("^(?!x).+$", "y", true), ("^(?!x).+$", "xy", false),
        ] as [(String, String, Bool)])
    func fallback(pattern: String, input: String, expected: Bool) throws {
        let pattern = try Pattern(pattern)
        #expect(pattern.own == nil)
        #expect(pattern.matches(input) == expected)
    }

    @Test("invalid patterns are schema errors", arguments: ["(unclosed", "a)", "[z-a]", "*a", "a{3,1}", "x**", "[abc"])
    func invalid(pattern: String) {
        #expect(throws: SchemaError.self) { try Pattern(pattern) }
    }

    // The search first runs on a small stack (`ECMARegex.smallStack` entries) and only on the full
    // bound if that fills: each of these keeps about two entries per character pending, far more.
    @Test(
        "a search deeper than the first, small stack gives the same answer on the full one",
        arguments: [
            ("^(a|b)*c$", String(repeating: "ab", count: 100) + "c", true),
            ("^(a|b)*c$", String(repeating: "ab", count: 100) + "d", false),
            ("(a|b)*c", String(repeating: "ab", count: 100), false),
            ("(x|y)*z", "w" + String(repeating: "xy", count: 300) + "z", true),
        ] as [(String, String, Bool)])
    func deepSearch(pattern: String, input: String, expected: Bool) throws {
        #expect(2 * input.count > ECMARegex.smallStack)
        let regex = try ECMARegex(pattern)
        #expect(regex.matches(input) == expected)
        #expect((try Regex(pattern).firstMatch(in: input) != nil) == expected)
    }

    @Test("a 10 MB input goes to the fallback instead of allocating a huge state set")
    func hugeInput() throws {
        let pattern = try Pattern("^[a-j]+k?$")
        let big = String(repeating: "abcdefghij", count: 1_000_000)
        #expect(pattern.own?.matches(big) == nil)
        #expect(pattern.matches(big))
    }

    @Test("whole-input runs of one class take the one-pass path and agree with Swift's Regex")
    func anchoredRuns() throws {
        let runs = [
            "^[a-c]+$", "^([ab]{2})+$", "^[a-c]{2,3}$", "^a*$", "^.{3}$", "^(a{2}){1,2}$", "^[^x]+$", "^[!-~]+$",
        ]
        let others = ["^[a-c]+x$", "[a-c]+$", "^[a-c]+", "^(a|b)+$", "^(ab)+$"]
        let alphabet: [Character] = ["a", "b", "c", "x", "é", "\n"]
        var inputs: [String] = [""]
        for length in 1...4 {
            for prefix in inputs where prefix.count == length - 1 {
                for c in alphabet { inputs.append(prefix + String(c)) }
            }
        }
        for source in runs + others {
            let own = try ECMARegex(source)
            #expect((own.anchoredRun != nil) == runs.contains(source), "\(source)")
            let swift = try Regex(Pattern.translate(source)).matchingSemantics(.unicodeScalar)
            for input in inputs {
                #expect(own.matches(input) == ((try? swift.firstMatch(in: input)) != nil), "\(source) on '\(input)'")
            }
        }
        let token = try ECMARegex("^([0-9A-Fa-f]{2})+$")
        #expect(token.matches(String(repeating: "ab", count: 32)) == true)
        #expect(token.matches(String(repeating: "ab", count: 32) + "a") == false, "odd length")
        #expect(token.matches(String(repeating: "ab", count: 31) + "zz") == false)
    }

    @Test("agrees with Swift's Regex on generated inputs")
    func differential() throws {
        let patterns = ["^a(b|c)*d$", "(ab|a)(bc|c)", "^[a-c]{2,4}$", "b+c?", "^(a|b)*?c", "x|^y", "^\\w+\\b"]
        let alphabet: [Character] = ["a", "b", "c", "d", "x", "y", " "]
        var inputs: [String] = [""]
        for length in 1...4 {
            var next: [String] = []
            for prefix in inputs where prefix.count == length - 1 {
                for c in alphabet { next.append(prefix + String(c)) }
            }
            inputs += next
        }
        for source in patterns {
            let own = try ECMARegex(source)
            let swift = try Regex(Pattern.translate(source)).matchingSemantics(.unicodeScalar)
            for input in inputs {
                #expect(own.matches(input) == ((try? swift.firstMatch(in: input)) != nil), "\(source) on '\(input)'")
            }
        }
    }
}
