/// A recursive-descent parser for ECMA-262 pattern syntax (without the `u` flag, Annex B leniency
/// for a `{` that starts no quantifier and for identity escapes).
struct ECMARegexParser {
    let s: [UInt32]
    var i = 0
    var depth = 0

    init(_ source: String) {
        s = source.unicodeScalars.map(\.value)
    }

    static func parse(_ source: String) throws(RegexSyntaxIssue) -> RegexNode {
        var p = ECMARegexParser(source)
        let node = try p.alternation()
        guard p.i == p.s.count else { throw .invalid("unmatched ')'") }
        return node
    }

    func peek(_ c: Character) -> Bool { i < s.count && s[i] == c.unicodeScalars.first!.value }

    mutating func alternation() throws(RegexSyntaxIssue) -> RegexNode {
        var branches = [try sequence()]
        while peek("|") {
            i += 1
            branches.append(try sequence())
        }
        return branches.count == 1 ? branches[0] : .alternation(branches)
    }

    mutating func sequence() throws(RegexSyntaxIssue) -> RegexNode {
        var items: [RegexNode] = []
        while i < s.count && !peek("|") && !peek(")") {
            let atom = try self.atom()
            items.append(try quantified(atom))
        }
        return items.count == 1 ? items[0] : .concat(items)
    }

    mutating func quantified(_ atom: RegexNode) throws(RegexSyntaxIssue) -> RegexNode {
        guard i < s.count else { return atom }
        var min = 0
        var max: Int? = nil
        switch s[i] {
        case 0x2A: i += 1  // *
        case 0x2B: i += 1; min = 1  // +
        case 0x3F: i += 1; max = 1  // ?
        case 0x7B:  // {
            guard let (lo, hi, next) = braceQuantifier(at: i) else { return atom }
            min = lo
            max = hi
            i = next
        default:
            return atom
        }
        if case .start = atom { throw .invalid("nothing to repeat") }
        if case .end = atom { throw .invalid("nothing to repeat") }
        if case .wordBoundary = atom { throw .invalid("nothing to repeat") }
        if let max, max < min { throw .invalid("numbers out of order in {} quantifier") }
        if peek("?") { i += 1 }  // lazy: the same language
        return .repeated(atom, min: min, max: max)
    }

    /// `{n}`, `{n,}`, `{n,m}`: the bounds and the index after `}`; nil when it is a literal `{`.
    func braceQuantifier(at start: Int) -> (Int, Int?, Int)? {
        var j = start + 1
        func number() -> Int? {
            let from = j
            var v = 0
            while j < s.count, s[j] >= 48, s[j] <= 57 {
                v = v * 10 + Int(s[j] - 48)
                if v > 100_000 { v = 100_000 }
                j += 1
            }
            return j > from ? v : nil
        }
        guard let lo = number() else { return nil }
        var hi: Int? = lo
        if j < s.count && s[j] == 0x2C {
            j += 1
            hi = number()
        }
        guard j < s.count && s[j] == 0x7D else { return nil }
        return (lo, hi, j + 1)
    }

    mutating func atom() throws(RegexSyntaxIssue) -> RegexNode {
        let c = s[i]
        i += 1
        switch c {
        case 0x5E: return .start  // ^
        case 0x24: return .end  // $
        case 0x2E: return .set(.of(ScalarSet.lineTerminators.ranges, negated: true))  // .
        case 0x28:  // (
            depth += 1
            if depth > 200 { throw .unsupported }
            if peek("?") {
                i += 1
                if peek(":") {
                    i += 1
                } else if peek("<") && i + 1 < s.count && s[i + 1] != 0x3D && s[i + 1] != 0x21 {
                    // Named group: skip the name.
                    while i < s.count && s[i] != 0x3E { i += 1 }
                    guard i < s.count else { throw .invalid("unterminated group name") }
                    i += 1
                } else {
                    throw .unsupported  // lookahead / lookbehind
                }
            }
            let inner = try alternation()
            guard peek(")") else { throw .invalid("missing ')'") }
            i += 1
            depth -= 1
            return inner
        case 0x29: throw .invalid("unmatched ')'")
        case 0x5B: return .set(try characterClass())  // [
        case 0x5C: return try escape(inClass: false)
        case 0x2A, 0x2B, 0x3F: throw .invalid("nothing to repeat")
        case 0x7B:
            if braceQuantifier(at: i - 1) != nil { throw .invalid("nothing to repeat") }
            return .scalar(c)
        default: return .scalar(c)
        }
    }

    mutating func escape(inClass: Bool) throws(RegexSyntaxIssue) -> RegexNode {
        guard i < s.count else { throw .invalid("\\ at end of pattern") }
        let c = s[i]
        i += 1
        switch Character(Unicode.Scalar(c)!) {
        case "d": return .set(.digit)
        case "D": return .set(.of(ScalarSet.digit.ranges, negated: true))
        case "w": return .set(.word)
        case "W": return .set(.of(ScalarSet.word.ranges, negated: true))
        case "s": return .set(.space)
        case "S": return .set(.of(ScalarSet.space.ranges, negated: true))
        case "b": return inClass ? .scalar(8) : .wordBoundary(true)
        case "B": if inClass { return .scalar(0x42) } else { return .wordBoundary(false) }
        case "n": return .scalar(10)
        case "r": return .scalar(13)
        case "t": return .scalar(9)
        case "f": return .scalar(12)
        case "v": return .scalar(11)
        case "0": return .scalar(0)
        case "1"..."9": if inClass { return .scalar(c) } else { throw .unsupported }  // backreference
        case "k": if inClass { return .scalar(c) } else { throw .unsupported }
        case "x": return .scalar(try hexDigits(2) ?? c)
        case "u": return .scalar(try hexDigits(4) ?? c)
        case "c":
            if i < s.count, (65...90).contains(s[i]) || (97...122).contains(s[i]) {
                i += 1
                return .scalar(s[i - 1] % 32)
            }
            i -= 1
            return .scalar(0x5C)
        default: return .scalar(c)  // identity escape
        }
    }

    mutating func hexDigits(_ n: Int) throws(RegexSyntaxIssue) -> UInt32? {
        guard i + n <= s.count else { return nil }
        var v: UInt32 = 0
        for k in 0..<n {
            let d = s[i + k]
            switch d {
            case 48...57: v = v * 16 + d - 48
            case 65...70: v = v * 16 + d - 55
            case 97...102: v = v * 16 + d - 87
            default: return nil
            }
        }
        i += n
        return v
    }

    mutating func characterClass() throws(RegexSyntaxIssue) -> ScalarSet {
        var set = ScalarSet()
        if peek("^") {
            set.negated = true
            i += 1
        }
        while true {
            guard i < s.count else { throw .invalid("missing ']'") }
            if peek("]") {
                i += 1
                break
            }
            let low = try classAtom()
            if peek("-") && i + 1 < s.count && s[i + 1] != 0x5D {
                i += 1
                let high = try classAtom()
                guard case .scalar(let a) = low, case .scalar(let b) = high else {
                    // `[\d-x]`: Annex B reads the '-' literally.
                    for part in [low, .scalar(0x2D), high] { add(part, to: &set) }
                    continue
                }
                guard a <= b else { throw .invalid("range out of order in character class") }
                set.insert(a...b)
            } else {
                add(low, to: &set)
            }
        }
        set.finish()
        return set
    }

    func add(_ node: RegexNode, to set: inout ScalarSet) {
        switch node {
        case .scalar(let c): set.insert(c...c)
        case .set(let other): set.insert(other)
        default: break
        }
    }

    mutating func classAtom() throws(RegexSyntaxIssue) -> RegexNode {
        let c = s[i]
        i += 1
        if c == 0x5C { return try escape(inClass: true) }
        return .scalar(c)
    }
}
