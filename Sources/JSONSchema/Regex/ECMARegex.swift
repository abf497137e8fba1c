/// A small regular-expression engine for the ECMA-262 subset JSON Schema patterns use: literals,
/// classes, `.`, anchors, `\b`, groups, alternation and every quantifier. Lookaround and
/// backreferences are not in it (``Pattern`` hands those to Swift's `Regex`).
///
/// Why: Swift's `Regex` takes about 10 µs to match a 64-digit hex device token, which alone would
/// cap validation near 100,000 events/s. This compiles to a Thompson-style program run by a
/// backtracking machine that remembers visited (instruction, position) pairs (RE2's "bit state"), so
/// a match is linear in the input for any pattern, and uses an explicit stack, not recursion.
struct ECMARegex: Sendable {
    enum Instruction: Sendable {
        case scalar(UInt32)
        case set(Int)
        case split(Int, Int)
        case jump(Int)
        case start
        case end
        case wordBoundary(Bool)
        case match
    }

    let program: [Instruction]
    let sets: [ScalarSet]
    let anchoredAtStart: Bool
    /// Split instructions: each (split, position) pushes at most once, which bounds the stack.
    let splitCount: Int

    /// Program size × input length above which ``matches`` declines (returns nil), to bound memory.
    static let maxStateBits = 1 << 22
    /// The bound when there is no other engine to hand over to (128 MiB of state).
    static let maxStateBitsWithoutFallback = 1 << 30
    static let maxProgram = 20_000

    /// `^S+$`, `^(S{2})+$`, `^S{8,64}$`…: one class over the whole input, in runs of `unit` scalars,
    /// `minimum` to `maximum` runs. The shape of most schema patterns (device tokens, ids): checked by
    /// one pass over the input, without the machine. Nil for every other shape.
    struct AnchoredRun: Sendable {
        let set: ScalarSet
        let unit: Int
        let minimum: Int
        let maximum: Int?

        func matches(_ string: String) -> Bool {
            // ASCII in contiguous UTF-8 (nearly every token and id): one byte, one scalar.
            let ascii = string.utf8.withContiguousStorageIfAvailable { bytes -> Bool? in
                for byte in bytes {
                    guard byte < 0x80 else { return nil }
                    guard set.contains(UInt32(byte)) else { return false }
                }
                return accepts(count: bytes.count)
            }
            if case .some(.some(let verdict)) = ascii { return verdict }
            var count = 0
            for scalar in string.unicodeScalars {
                guard set.contains(scalar.value) else { return false }
                count += 1
            }
            return accepts(count: count)
        }

        private func accepts(count: Int) -> Bool {
            guard count % unit == 0 else { return false }
            let runs = count / unit
            return runs >= minimum && runs <= (maximum ?? Int.max)
        }

        init?(_ tree: RegexNode) {
            guard case .concat(let items) = tree, items.count == 3, case .start = items[0], case .end = items[2],
                case .repeated(let inner, let minimum, let maximum) = items[1], let (set, unit) = Self.unit(inner),
                unit > 0
            else { return nil }
            var finished = set
            finished.finish()
            self.set = finished
            self.unit = unit
            self.minimum = minimum
            self.maximum = maximum
        }

        /// A fixed number of scalars from one class: `S`, `S{k}`, `(S{k})`.
        private static func unit(_ node: RegexNode) -> (ScalarSet, Int)? {
            switch node {
            case .set(let set): return (set, 1)
            case .scalar(let c): return (ScalarSet.of([c...c]), 1)
            case .any: return (ScalarSet.dot, 1)
            case .repeated(let inner, let minimum, let maximum) where maximum == minimum:
                guard let (set, unit) = Self.unit(inner) else { return nil }
                return (set, unit * minimum)
            default: return nil
            }
        }
    }

    /// Set when the whole pattern is an ``AnchoredRun``.
    let anchoredRun: AnchoredRun?

    init(_ source: String) throws(RegexSyntaxIssue) {
        let tree = try ECMARegexParser.parse(source)
        anchoredRun = AnchoredRun(tree)
        var compiler = Compiler()
        try compiler.emit(tree)
        compiler.program.append(.match)
        program = compiler.program
        sets = compiler.sets
        if case .start = program.first { anchoredAtStart = true } else { anchoredAtStart = false }
        splitCount = program.reduce(0) { count, instruction in
            if case .split = instruction { return count + 1 }
            return count
        }
    }

    struct Compiler {
        var program: [Instruction] = []
        var sets: [ScalarSet] = []

        mutating func emit(_ node: RegexNode) throws(RegexSyntaxIssue) {
            if program.count > ECMARegex.maxProgram { throw .unsupported }
            switch node {
            case .empty: break
            case .scalar(let c): program.append(.scalar(c))
            case .set(var set):
                set.finish()
                sets.append(set)
                program.append(.set(sets.count - 1))
            case .any:
                var set = ScalarSet.dot
                set.finish()
                sets.append(set)
                program.append(.set(sets.count - 1))
            case .start: program.append(.start)
            case .end: program.append(.end)
            case .wordBoundary(let b): program.append(.wordBoundary(b))
            case .concat(let items): for item in items { try emit(item) }
            case .alternation(let branches):
                var jumps: [Int] = []
                for (k, branch) in branches.enumerated() {
                    if k < branches.count - 1 {
                        let split = program.count
                        program.append(.split(split + 1, -1))
                        try emit(branch)
                        jumps.append(program.count)
                        program.append(.jump(-1))
                        program[split] = .split(split + 1, program.count)
                    } else {
                        try emit(branch)
                    }
                }
                for j in jumps { program[j] = .jump(program.count) }
            case .repeated(let inner, let min, let max):
                for _ in 0..<min { try emit(inner) }
                if let max {
                    for _ in min..<max {
                        let split = program.count
                        program.append(.split(split + 1, -1))
                        try emit(inner)
                        program[split] = .split(split + 1, program.count)
                    }
                } else {
                    let split = program.count
                    program.append(.split(split + 1, -1))
                    try emit(inner)
                    program.append(.jump(split))
                    program[split] = .split(split + 1, program.count)
                }
            }
        }
    }

    /// Whether the pattern occurs in `string`; nil when the input is too large for this engine.
    ///
    /// ASCII strings (device tokens, topics, ids) are matched on their UTF-8 bytes in place; others
    /// are decoded to code points once. The visited set lives in a temporary (stack, when small)
    /// allocation.
    func matches(_ string: String, maxStateBits: Int = ECMARegex.maxStateBits) -> Bool? {
        if let anchoredRun { return anchoredRun.matches(string) }
        // At least a quarter as many code points as bytes: decline huge inputs before decoding them.
        if program.count * (string.utf8.count / 4 + 1) > maxStateBits { return nil }
        let ascii: Bool?? = string.utf8.withContiguousStorageIfAvailable { bytes -> Bool? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            return run(ASCIIInput(bytes: bytes), maxStateBits: maxStateBits)
        }
        if case .some(.some(let verdict)) = ascii { return verdict }
        let scalars = string.unicodeScalars.map(\.value)
        return scalars.withUnsafeBufferPointer { run(ScalarInput(scalars: $0), maxStateBits: maxStateBits) }
    }

    private func run<Input: RegexInput>(_ input: Input, maxStateBits: Int) -> Bool? {
        let n = input.count
        let width = n + 1
        guard program.count * width <= maxStateBits else { return nil }
        let words = (program.count * width + 63) / 64
        // One slot per possible push, plus the start state.
        let bound = 2 * (splitCount * width + 1)
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: words) { visited -> Bool in
            visited.initialize(repeating: 0)
            // The bound is rarely approached: first a stack small enough to live on the thread's
            // stack (a bound of a few KiB went to the heap, a `malloc` per check), and the bound
            // only if that fills.
            if bound > Self.smallStack {
                let found = withUnsafeTemporaryAllocation(of: Int.self, capacity: Self.smallStack) { stack in
                    search(input, visited: visited, stack: stack)
                }
                if let found { return found }
                visited.update(repeating: 0)
            }
            return withUnsafeTemporaryAllocation(of: Int.self, capacity: bound) { stack in
                // Cannot fill: each (split, position) pushes at most once.
                search(input, visited: visited, stack: stack) ?? false
            }
        }
    }

    /// Entries of the first, small stack (`run`): 512 bytes, under the size that Swift allocates on
    /// the thread's stack rather than the heap.
    static let smallStack = 64

    /// `nil` when `stack` filled before an answer.
    private func search<Input: RegexInput>(
        _ input: Input, visited: UnsafeMutableBufferPointer<UInt64>, stack: UnsafeMutableBufferPointer<Int>
    ) -> Bool? {
        let n = input.count
        let width = n + 1
        var top = 0  // stack holds (pc, at) pairs
        let lastStart = anchoredAtStart ? 0 : n
        for start in 0...lastStart {
            stack[0] = 0
            stack[1] = start
            top = 2
            while top > 0 {
                top -= 2
                var pc = stack[top]
                var at = stack[top + 1]
                while true {
                    let bit = pc * width + at
                    if visited[bit >> 6] & (1 << UInt64(bit & 63)) != 0 { break }
                    visited[bit >> 6] |= 1 << UInt64(bit & 63)
                    switch program[pc] {
                    case .scalar(let c):
                        guard at < n && input[at] == c else { break }
                        pc += 1
                        at += 1
                        continue
                    case .set(let k):
                        guard at < n && sets[k].contains(input[at]) else { break }
                        pc += 1
                        at += 1
                        continue
                    case .split(let preferred, let other):
                        guard top + 2 <= stack.count else { return nil }
                        stack[top] = other
                        stack[top + 1] = at
                        top += 2
                        pc = preferred
                        continue
                    case .jump(let target):
                        pc = target
                        continue
                    case .start:
                        guard at == 0 else { break }
                        pc += 1
                        continue
                    case .end:
                        guard at == n else { break }
                        pc += 1
                        continue
                    case .wordBoundary(let wanted):
                        let before = at > 0 && ScalarSet.word.ranges.contains { $0.contains(input[at - 1]) }
                        let after = at < n && ScalarSet.word.ranges.contains { $0.contains(input[at]) }
                        guard (before != after) == wanted else { break }
                        pc += 1
                        continue
                    case .match:
                        return true
                    }
                    break
                }
            }
        }
        return false
    }
}

/// What the matcher reads: code points by position.
private protocol RegexInput {
    var count: Int { get }
    subscript(_ i: Int) -> UInt32 { get }
}

private struct ASCIIInput: RegexInput {
    let bytes: UnsafeBufferPointer<UInt8>
    var count: Int { bytes.count }
    subscript(_ i: Int) -> UInt32 { UInt32(bytes[i]) }
}

private struct ScalarInput: RegexInput {
    let scalars: UnsafeBufferPointer<UInt32>
    var count: Int { scalars.count }
    subscript(_ i: Int) -> UInt32 { scalars[i] }
}
