/// The members of a JSON object, in document order, with unique keys.
///
/// Lookups are linear for small objects (the common case for events: a linear scan of a dozen
/// short keys beats hashing) and go through an index built once for larger ones.
package struct JSONObject: Sendable {
    package typealias Member = (key: String, value: JSONValue)

    /// Members in document order: one array of pairs, not one of keys and one of values (every
    /// parsed object is an allocation, and an event has four or five).
    package private(set) var members: [Member]
    private var index: [String: Int]?

    private static let indexThreshold = 12

    package init() {
        members = []
    }

    /// Members in order; a repeated key keeps its last value.
    package init<S: Sequence>(_ members: S) where S.Element == (String, JSONValue) {
        self.init()
        for (k, v) in members { self[k] = v }
    }

    /// Builds from members known to have unique keys (the parser checks them).
    init(uniqueMembers members: [Member]) {
        self.members = members
        if members.count > Self.indexThreshold { buildIndex() }
    }

    package var count: Int { members.count }
    package var isEmpty: Bool { members.isEmpty }

    /// Names in document order.
    package var keys: LazyMapCollection<[Member], String> { members.lazy.map(\.key) }
    /// Values in document order.
    package var values: LazyMapCollection<[Member], JSONValue> { members.lazy.map(\.value) }

    package func position(of key: String) -> Int? {
        if let index { return index[key] }
        // Lengths first: O(1) for native strings, and most keys differ in length.
        let length = key.utf8.count
        for i in members.indices where members[i].key.utf8.count == length && members[i].key == key { return i }
        return nil
    }

    package subscript(key: String) -> JSONValue? {
        get { position(of: key).map { members[$0].value } }
        set {
            if let i = position(of: key) {
                if let newValue {
                    members[i].value = newValue
                } else {
                    members.remove(at: i)
                    index = nil
                    if members.count > Self.indexThreshold { buildIndex() }
                }
            } else if let newValue {
                members.append((key, newValue))
                if index != nil {
                    index![key] = members.count - 1
                } else if members.count > Self.indexThreshold {
                    buildIndex()
                }
            }
        }
    }

    private mutating func buildIndex() {
        var idx = [String: Int](minimumCapacity: members.count)
        for (i, member) in members.enumerated() { idx[member.key] = i }
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
