/// Just enough of RFC 3986 for `$id` and `$ref`: splitting a reference into its five parts and
/// resolving it against a base (section 5.2, with dot-segment removal). Foundation's URL is avoided
/// on purpose: it rejects or rewrites some references the JSON Schema test suite uses (URNs, empty
/// fragments, unusual characters in fragments).
struct URIReference: Hashable, Sendable {
    var scheme: String?
    var authority: String?
    var path: String
    var query: String?
    var fragment: String?

    init(_ text: String) {
        var rest = Substring(text)
        if let hash = rest.firstIndex(of: "#") {
            fragment = String(rest[rest.index(after: hash)...])
            rest = rest[..<hash]
        }
        if let q = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: q)...])
            rest = rest[..<q]
        }
        if let colon = rest.firstIndex(of: ":"),
            let first = rest.first, first.isLetter,
            rest[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }),
            !rest[..<colon].contains("/")
        {
            scheme = String(rest[..<colon])
            rest = rest[rest.index(after: colon)...]
        }
        if rest.hasPrefix("//") {
            rest = rest.dropFirst(2)
            let end = rest.firstIndex(of: "/") ?? rest.endIndex
            authority = String(rest[..<end])
            rest = rest[end...]
        }
        path = String(rest)
    }

    var string: String {
        var s = ""
        if let scheme { s += scheme + ":" }
        if let authority { s += "//" + authority }
        s += path
        if let query { s += "?" + query }
        if let fragment { s += "#" + fragment }
        return s
    }

    /// The reference without its fragment (an empty fragment counts as none).
    var withoutFragment: URIReference {
        var copy = self
        copy.fragment = nil
        return copy
    }

    /// RFC 3986 section 5.2.2.
    func resolved(against base: URIReference) -> URIReference {
        var t = URIReference("")
        if scheme != nil {
            t.scheme = scheme
            t.authority = authority
            t.path = Self.removeDotSegments(path)
            t.query = query
        } else {
            if authority != nil {
                t.authority = authority
                t.path = Self.removeDotSegments(path)
                t.query = query
            } else {
                if path.isEmpty {
                    t.path = base.path
                    t.query = query ?? base.query
                } else {
                    if path.hasPrefix("/") {
                        t.path = Self.removeDotSegments(path)
                    } else {
                        t.path = Self.removeDotSegments(merge(base))
                    }
                    t.query = query
                }
                t.authority = base.authority
            }
            t.scheme = base.scheme
        }
        t.fragment = fragment
        return t
    }

    private func merge(_ base: URIReference) -> String {
        if base.authority != nil && base.path.isEmpty { return "/" + path }
        if let slash = base.path.lastIndex(of: "/") {
            return base.path[...slash] + path
        }
        return path
    }

    static func removeDotSegments(_ input: String) -> String {
        guard input.contains(".") else { return input }
        var output: [Substring] = []
        let absolute = input.hasPrefix("/")
        let segments = input.split(separator: "/", omittingEmptySubsequences: false)
        for (i, segment) in segments.enumerated() {
            if i == 0 && absolute { continue }
            if segment == "." {
                if i == segments.count - 1 { output.append("") }
            } else if segment == ".." {
                if !output.isEmpty { output.removeLast() }
                if i == segments.count - 1 { output.append("") }
            } else {
                output.append(segment)
            }
        }
        return (absolute ? "/" : "") + output.joined(separator: "/")
    }
}
