/// The members of a JSON object, in document order, with unique keys.
///
/// Lookups are linear for small objects (the common case for events: a linear scan of a dozen
/// short keys beats hashing) and go through an index built once for larger ones.
package struct JSONObject: Sendable {
    package private(set) var keys: [String]
    package private(set) var values: [JSONValue]
    private var index: [String: Int]?

    private static let indexThreshold = 12

    package init() {
        keys = []
        values = []
    }

    /// Members in order; a repeated key keeps its last value.
    package init<S: Sequence>(_ members: S) where S.Element == (String, JSONValue) {
        self.init()
        for (k, v) in members { self[k] = v }
    }

    /// Builds from members known to have unique keys (the parser checks them).
    init(uniqueKeys keys: [String], values: [JSONValue]) {
        self.keys = keys
        self.values = values
        if keys.count > Self.indexThreshold { buildIndex() }
    }

    package var count: Int { keys.count }
    package var isEmpty: Bool { keys.isEmpty }

    package func position(of key: String) -> Int? {
        if let index { return index[key] }
        // Lengths first: O(1) for native strings, and most keys differ in length.
        let length = key.utf8.count
        for i in keys.indices where keys[i].utf8.count == length && keys[i] == key { return i }
        return nil
    }

    package subscript(key: String) -> JSONValue? {
        get { position(of: key).map { values[$0] } }
        set {
            if let i = position(of: key) {
                if let newValue {
                    values[i] = newValue
                } else {
                    keys.remove(at: i)
                    values.remove(at: i)
                    index = nil
                    if keys.count > Self.indexThreshold { buildIndex() }
                }
            } else if let newValue {
                keys.append(key)
                values.append(newValue)
                if index != nil {
                    index![key] = keys.count - 1
                } else if keys.count > Self.indexThreshold {
                    buildIndex()
                }
            }
        }
    }

    /// Members in document order.
    package var members: Zip2Sequence<[String], [JSONValue]> { zip(keys, values) }

    private mutating func buildIndex() {
        var idx = [String: Int](minimumCapacity: keys.count)
        for (i, k) in keys.enumerated() { idx[k] = i }
        index = idx
    }
}

extension JSONObject: Hashable {
    package static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (k, v) in lhs.members {
            guard let other = rhs[k], other == v else { return false }
        }
        return true
    }

    /// Order-independent, so equal objects hash alike whatever their member order.
    package func hash(into hasher: inout Hasher) {
        var combined = 0
        for (k, v) in members {
            var h = Hasher()
            h.combine(k)
            h.combine(v)
            combined ^= h.finalize()
        }
        hasher.combine(count)
        hasher.combine(combined)
    }
}
