import NIOHTTP2

/// The streams of a connection whose request is still arriving. A client sends a request's HEADERS and
/// its DATA one after the other, so the stream opened last is kept in a slot of its own and the usual
/// HEADERS-then-DATA pair never hashes a stream ID; streams left waiting behind it go to a dictionary.
struct PendingStreams {
    private var slotID: HTTP2StreamID?
    private var slot: APNsConnectionHandler.PendingStream?
    private var others: [HTTP2StreamID: APNsConnectionHandler.PendingStream] = [:]

    var count: Int { others.count + (slotID == nil ? 0 : 1) }
    var isEmpty: Bool { slotID == nil && others.isEmpty }

    subscript(id: HTTP2StreamID) -> APNsConnectionHandler.PendingStream? {
        get {
            if id == slotID { return slot }
            return others.isEmpty ? nil : others[id]
        }
        set {
            if id == slotID {
                if newValue == nil { slotID = nil }
                slot = newValue
            } else if !others.isEmpty, others[id] != nil {
                others[id] = newValue
            } else if let newValue {
                // A new stream takes the slot; the one waiting there moves aside.
                if let waiting = slotID { others[waiting] = slot }
                slotID = id
                slot = newValue
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey id: HTTP2StreamID) -> APNsConnectionHandler.PendingStream? {
        let removed = self[id]
        if removed != nil { self[id] = nil }
        return removed
    }

    mutating func removeAll() {
        slotID = nil
        slot = nil
        others.removeAll()
    }
}
