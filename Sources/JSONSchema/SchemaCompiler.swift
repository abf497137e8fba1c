/// Turns schema documents into a ``Program``: indexes every `$id`, resolves every `$ref` to a node
/// index (fetching remote documents through the caller's resolver, once each), checks keyword
/// values, and refuses reference cycles that would loop without consuming the instance.
struct SchemaCompiler {
    struct Location: Hashable {
        var document: Int
        var pointer: String

        func appending(_ token: String) -> Location {
            Location(document: document, pointer: pointer + "/" + JSONPointer.escape(token))
        }
    }

    var documents: [JSONValue] = []
    var documentURIs: [String] = []
    /// Absolute URIs (`$id`s without fragment, plain-name anchors with it) → where they point.
    var resources: [String: Location] = [:]
    /// The base URI in force at every indexed subschema.
    var bases: [Location: URIReference] = [:]
    var memo: [Location: Int] = [:]
    var nodes: [SchemaNode] = []
    let resolver: ((String) throws -> JSONValue?)?
    let formatAssertion: Bool

    init(resolver: ((String) throws -> JSONValue?)?, formatAssertion: Bool) {
        self.resolver = resolver
        self.formatAssertion = formatAssertion
    }

    mutating func compile(root: JSONValue, baseURI: String) throws(SchemaError) -> Program {
        let doc = addDocument(root, uri: baseURI)
        let rootIndex = try compile(Location(document: doc, pointer: ""))
        try checkCycles(from: rootIndex)
        return Program(lowering: nodes, root: rootIndex)
    }

    // MARK: documents and identifiers

    mutating func addDocument(_ value: JSONValue, uri: String) -> Int {
        let doc = documents.count
        documents.append(value)
        let base = URIReference(uri).withoutFragment
        documentURIs.append(base.string)
        resources[base.string] = Location(document: doc, pointer: "")
        index(value, at: Location(document: doc, pointer: ""), base: base)
        // Locations in error reports use the document's own `$id` when it has one.
        if let own = bases[Location(document: doc, pointer: "")], own != base { documentURIs[doc] = own.string }
        return doc
    }

    static let subschemaKeywords = [
        "additionalItems", "additionalProperties", "contains", "propertyNames", "if", "then", "else", "not",
    ]
    static let subschemaArrayKeywords = ["allOf", "anyOf", "oneOf"]
    static let subschemaMapKeywords = ["properties", "patternProperties", "definitions", "dependencies"]

    /// Records base URIs and `$id`s, walking only where subschemas are (an `$id` inside `enum` or
    /// `const` is data, not an identifier).
    mutating func index(_ value: JSONValue, at location: Location, base: URIReference) {
        guard case .object(let object) = value else {
            bases[location] = base
            return
        }
        var base = base
        if object["$ref"] == nil, case .string(let id)? = object["$id"] {
            let resolved = URIReference(id).resolved(against: base)
            if id.hasPrefix("#") {
                resources[resolved.string] = location
            } else {
                base = resolved.withoutFragment
                resources[base.string] = location
                if let fragment = resolved.fragment, !fragment.isEmpty, !fragment.hasPrefix("/") {
                    resources[resolved.string] = location
                }
            }
        }
        bases[location] = base
        for keyword in Self.subschemaKeywords {
            if let sub = object[keyword] { index(sub, at: location.appending(keyword), base: base) }
        }
        if let items = object["items"] {
            if case .array(let list) = items {
                for (i, sub) in list.enumerated() {
                    index(sub, at: location.appending("items").appending(String(i)), base: base)
                }
            } else {
                index(items, at: location.appending("items"), base: base)
            }
        }
        for keyword in Self.subschemaArrayKeywords {
            guard case .array(let list)? = object[keyword] else { continue }
            for (i, sub) in list.enumerated() {
                index(sub, at: location.appending(keyword).appending(String(i)), base: base)
            }
        }
        for keyword in Self.subschemaMapKeywords {
            guard case .object(let map)? = object[keyword] else { continue }
            for (name, sub) in map.members where sub.objectValue != nil || sub.boolValue != nil {
                index(sub, at: location.appending(keyword).appending(name), base: base)
            }
        }
    }

    /// The base URI at `location`, indexing it first if nothing has (a `$ref` into an odd place).
    mutating func base(at location: Location) -> URIReference {
        if let b = bases[location] { return b }
        var tokens = JSONPointer.tokens(location.pointer) ?? []
        var ancestorBase = URIReference(documentURIs[location.document])
        while !tokens.isEmpty {
            tokens.removeLast()
            if let b = bases[Location(document: location.document, pointer: JSONPointer.from(tokens))] {
                ancestorBase = b
                break
            }
        }
        if let value = JSONPointer.resolve(location.pointer, in: documents[location.document]) {
            index(value, at: location, base: ancestorBase)
        }
        return bases[location] ?? ancestorBase
    }

    func locationString(_ location: Location) -> String {
        documentURIs[location.document] + "#" + location.pointer
    }

    // MARK: references

    mutating func resolveReference(_ reference: String, from location: Location) throws(SchemaError) -> Location {
        let where_ = locationString(location.appending("$ref"))
        let target = URIReference(reference).resolved(against: base(at: location))
        let documentURI = target.withoutFragment.string
        let fragment = target.fragment ?? ""
        if !fragment.isEmpty && !fragment.hasPrefix("/") {
            if resources[target.string] == nil && resources[documentURI] == nil {
                try load(documentURI, for: reference, at: where_)
            }
            guard let found = resources[target.string] else {
                throw SchemaError("$ref '\(reference)' does not resolve: no anchor '\(fragment)'", at: where_)
            }
            return found
        }
        if resources[documentURI] == nil { try load(documentURI, for: reference, at: where_) }
        guard let resource = resources[documentURI] else {
            throw SchemaError("$ref '\(reference)' does not resolve", at: where_)
        }
        guard let pointer = fragment.percentDecoded(), JSONPointer.tokens(pointer) != nil else {
            throw SchemaError("$ref '\(reference)' has a fragment that is not a JSON pointer", at: where_)
        }
        let found = Location(document: resource.document, pointer: resource.pointer + pointer)
        guard JSONPointer.resolve(found.pointer, in: documents[found.document]) != nil else {
            throw SchemaError("$ref '\(reference)' does not resolve: nothing at '\(pointer)'", at: where_)
        }
        return found
    }

    mutating func load(_ uri: String, for reference: String, at where_: String) throws(SchemaError) {
        if uri == MetaSchema.draft07URI || uri == MetaSchema.draft07URI + "#" {
            _ = addDocument(MetaSchema.draft07, uri: MetaSchema.draft07URI)
            return
        }
        guard let resolver else {
            throw SchemaError("$ref '\(reference)' needs '\(uri)', and no resolver was given", at: where_)
        }
        let document: JSONValue?
        do {
            document = try resolver(uri)
        } catch {
            throw SchemaError("$ref '\(reference)': resolving '\(uri)' failed: \(error)", at: where_)
        }
        guard let document else { throw SchemaError("$ref '\(reference)': cannot resolve '\(uri)'", at: where_) }
        _ = addDocument(document, uri: uri)
    }

    // MARK: cycles

    /// A cycle through `$ref`, `allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else` or schema
    /// dependencies applies the schema to the same value forever: refuse it at compile time.
    func checkCycles(from root: Int) throws(SchemaError) {
        var state = [UInt8](repeating: 0, count: nodes.count)  // 0 new, 1 on stack, 2 done
        var stack: [(node: Int, next: Int, edges: [Int])] = [(root, 0, inPlaceEdges(root))]
        state[root] = 1
        var visitedDescendants: [Int] = []
        for i in nodes.indices where state[i] == 0 { visitedDescendants.append(i) }
        var roots = [root] + visitedDescendants
        while !roots.isEmpty {
            let start = roots.removeFirst()
            if state[start] == 2 { continue }
            if stack.isEmpty {
                state[start] = 1
                stack.append((start, 0, inPlaceEdges(start)))
            }
            while let top = stack.last {
                if top.next == top.edges.count {
                    state[top.node] = 2
                    stack.removeLast()
                    continue
                }
                let child = top.edges[top.next]
                stack[stack.count - 1].next += 1
                if state[child] == 1 {
                    throw SchemaError(
                        "reference cycle: this schema applies itself to the same value without end",
                        at: nodes[child].location)
                }
                if state[child] == 0 {
                    state[child] = 1
                    stack.append((child, 0, inPlaceEdges(child)))
                }
            }
        }
    }

    func inPlaceEdges(_ node: Int) -> [Int] {
        var edges: [Int] = []
        for keyword in nodes[node].keywords {
            switch keyword {
            case .ref(let n), .not(let n): edges.append(n)
            case .allOf(let ns), .anyOf(let ns), .oneOf(let ns): edges += ns
            case .conditional(let i, let t, let e): edges += [i] + [t, e].compactMap { $0 }
            case .dependencies(let deps):
                for (_, d) in deps { if case .schema(let n) = d { edges.append(n) } }
            default: break
            }
        }
        return edges
    }
}
