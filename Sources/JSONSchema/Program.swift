/// The compiled form of a schema that validation runs: flat tables that refer to each other by
/// index, so `$ref` (recursion included) is an index, not a lookup, and validation parses nothing.
///
/// Every ``Keyword`` is a plain value (indices and small numbers, no references), so walking the
/// keywords copies no reference-counted payloads: the bulky parts (enum values, numbers, patterns,
/// property tables) live once in the tables below and are read in place.
final class Program: Sendable {
    struct Node: Sendable {
        let firstKeyword: Int
        let keywordCount: Int
    }

    /// Classes, not structs: passing one along retains one reference, not each of its arrays.
    final class TupleItems: Sendable {
        let children: [Int]
        let additional: Int
        let additionalIsFalse: Bool

        init(children: [Int], additional: Int, additionalIsFalse: Bool) {
            self.children = children
            self.additional = additional
            self.additionalIsFalse = additionalIsFalse
        }
    }

    final class Properties: Sendable {
        /// Schema property names and their nodes, in schema order.
        let names: [String]
        let nodes: [Int]
        /// For many names, a hash index; for few, a linear scan of `names` is faster.
        let index: [String: Int]?
        let patterns: [(Pattern, Int)]
        /// -1: none.
        let additional: Int
        let additionalIsFalse: Bool

        init(
            names: [String], nodes: [Int], index: [String: Int]?, patterns: [(Pattern, Int)], additional: Int,
            additionalIsFalse: Bool
        ) {
            self.names = names
            self.nodes = nodes
            self.index = index
            self.patterns = patterns
            self.additional = additional
            self.additionalIsFalse = additionalIsFalse
        }

        func node(for key: String) -> Int? {
            if let index { return index[key].map { nodes[$0] } }
            let length = key.utf8.count
            for i in names.indices where names[i].utf8.count == length && names[i] == key { return nodes[i] }
            return nil
        }
    }

    enum Keyword: Sendable {
        case falseSchema
        case type(TypeSet)
        case enumeration(Int)
        case constant(Int)
        case multipleOf(Int)
        case maximum(Int)
        case exclusiveMaximum(Int)
        case minimum(Int)
        case exclusiveMinimum(Int)
        case maxLength(Int)
        case minLength(Int)
        case pattern(Int)
        case format(Format)
        case items(Int)
        case tupleItems(Int)
        case maxItems(Int)
        case minItems(Int)
        case uniqueItems
        case contains(Int)
        case maxProperties(Int)
        case minProperties(Int)
        case required(Int)
        case properties(Int)
        case dependencies(Int)
        case propertyNames(Int)
        /// Node indices; -1 for an absent `then` or `else`.
        case conditional(if: Int, then: Int, else: Int)
        case allOf(Int)
        case anyOf(Int)
        case oneOf(Int)
        case not(Int)
        case ref(Int)
    }

    let nodes: [Node]
    let keywords: [Keyword]
    /// Each node's schema location, for error reports only.
    let locations: [String]
    let root: Int

    let values: [JSONValue]
    let valueLists: [[JSONValue]]
    let numbers: [JSONNumber]
    let patterns: [Pattern]
    let nameLists: [[String]]
    let nodeLists: [[Int]]
    let tuples: [TupleItems]
    let propertyTables: [Properties]
    let dependencyTables: [[(String, Dependency)]]

    init(lowering schemaNodes: [SchemaNode], root: Int) {
        var b = Builder()
        var nodes: [Node] = []
        for node in schemaNodes {
            let first = b.keywords.count
            for keyword in node.keywords { b.keywords.append(b.lower(keyword)) }
            nodes.append(Node(firstKeyword: first, keywordCount: b.keywords.count - first))
        }
        self.nodes = nodes
        self.keywords = b.keywords
        self.locations = schemaNodes.map(\.location)
        self.root = root
        self.values = b.values
        self.valueLists = b.valueLists
        self.numbers = b.numbers
        self.patterns = b.patterns
        self.nameLists = b.nameLists
        self.nodeLists = b.nodeLists
        self.tuples = b.tuples
        self.propertyTables = b.propertyTables
        self.dependencyTables = b.dependencyTables
    }

    private struct Builder {
        var keywords: [Keyword] = []
        var values: [JSONValue] = []
        var valueLists: [[JSONValue]] = []
        var numbers: [JSONNumber] = []
        var patterns: [Pattern] = []
        var nameLists: [[String]] = []
        var nodeLists: [[Int]] = []
        var tuples: [TupleItems] = []
        var propertyTables: [Properties] = []
        var dependencyTables: [[(String, Dependency)]] = []

        mutating func number(_ n: JSONNumber) -> Int {
            numbers.append(n)
            return numbers.count - 1
        }

        mutating func list(_ l: [Int]) -> Int {
            nodeLists.append(l)
            return nodeLists.count - 1
        }

        mutating func lower(_ keyword: SchemaKeyword) -> Keyword {
            switch keyword {
            case .falseSchema: return .falseSchema
            case .type(let t): return .type(t)
            case .enumeration(let v):
                valueLists.append(v)
                return .enumeration(valueLists.count - 1)
            case .constant(let v):
                values.append(v)
                return .constant(values.count - 1)
            case .multipleOf(let n): return .multipleOf(number(n))
            case .maximum(let n): return .maximum(number(n))
            case .exclusiveMaximum(let n): return .exclusiveMaximum(number(n))
            case .minimum(let n): return .minimum(number(n))
            case .exclusiveMinimum(let n): return .exclusiveMinimum(number(n))
            case .maxLength(let n): return .maxLength(n)
            case .minLength(let n): return .minLength(n)
            case .pattern(let p):
                patterns.append(p)
                return .pattern(patterns.count - 1)
            case .format(let f): return .format(f)
            case .items(let n): return .items(n)
            case .tupleItems(let children, let additional, let additionalIsFalse):
                tuples.append(
                    TupleItems(children: children, additional: additional ?? -1, additionalIsFalse: additionalIsFalse))
                return .tupleItems(tuples.count - 1)
            case .maxItems(let n): return .maxItems(n)
            case .minItems(let n): return .minItems(n)
            case .uniqueItems: return .uniqueItems
            case .contains(let n): return .contains(n)
            case .maxProperties(let n): return .maxProperties(n)
            case .minProperties(let n): return .minProperties(n)
            case .required(let names):
                nameLists.append(names)
                return .required(nameLists.count - 1)
            case .properties(let p):
                let names = p.namedOrder.map(\.0)
                propertyTables.append(
                    Properties(
                        names: names, nodes: p.namedOrder.map(\.1),
                        index: names.count > 12
                            ? Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a }) : nil,
                        patterns: p.patterns, additional: p.additional ?? -1, additionalIsFalse: p.additionalIsFalse))
                return .properties(propertyTables.count - 1)
            case .dependencies(let d):
                dependencyTables.append(d)
                return .dependencies(dependencyTables.count - 1)
            case .propertyNames(let n): return .propertyNames(n)
            case .conditional(let i, let t, let e): return .conditional(if: i, then: t ?? -1, else: e ?? -1)
            case .allOf(let l): return .allOf(list(l))
            case .anyOf(let l): return .anyOf(list(l))
            case .oneOf(let l): return .oneOf(list(l))
            case .not(let n): return .not(n)
            case .ref(let n): return .ref(n)
            }
        }
    }
}
