/// Device pushes accepted more than once, told apart by their `apns-id`.
///
/// A provider that sends one notification again (after a crash, a lost answer, a hand-over) sends the
/// same `apns-id` when it derives the id from its own event; a second 200 for that id is a second push
/// to the device. Pushes without an `apns-id` cannot be told apart (APNs makes a new id for each) and
/// are only counted as untracked.
public struct RepeatedAcceptances: Sendable, Equatable {
    /// `apns-id`s accepted more than once: notifications pushed twice (or more).
    public var ids = 0
    /// Acceptances beyond the first, summed over those ids (an id accepted three times adds 2).
    public var extra = 0
    /// Distinct `apns-id`s whose acceptances are counted.
    public var tracked = 0
    /// Accepted device pushes not counted: without an `apns-id`, or a new id past the limit.
    public var untracked = 0

    public init(ids: Int = 0, extra: Int = 0, tracked: Int = 0, untracked: Int = 0) {
        self.ids = ids
        self.extra = extra
        self.tracked = tracked
        self.untracked = untracked
    }
}

/// Counts acceptances per `apns-id`, up to `limit` distinct ids.
///
/// Memory: an id is kept as its 16 bytes (no string) in a set, 22 to 43 bytes per distinct id with the
/// set's spare capacity; an id accepted again also gets a dictionary entry (about as much again). The
/// default limit of 100,000 ids so stays under 5 MB, or 10 MB were every id accepted twice. Past the
/// limit, acceptances of new ids are counted as untracked, and ids already tracked go on being
/// counted. Cost per acceptance: one parse of 36 characters and one set lookup, under the lock the
/// observation takes to count the answer anyway.
struct AcceptedIDCounter {
    /// A canonical UUID's 128 bits.
    struct ID: Hashable {
        var high: UInt64
        var low: UInt64

        /// Reads `8-4-4-4-12` hex digits in either case; `nil` for anything else.
        init?(_ text: String) {
            var high: UInt64 = 0
            var low: UInt64 = 0
            var text = text
            let parsed = text.withUTF8 { bytes -> Bool in
                guard bytes.count == 36 else { return false }
                var digits = 0
                for (offset, byte) in bytes.enumerated() {
                    if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                        guard byte == UInt8(ascii: "-") else { return false }
                        continue
                    }
                    let nibble: UInt8
                    switch byte {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
                    case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
                    case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = byte - UInt8(ascii: "A") + 10
                    default: return false
                    }
                    if digits < 16 {
                        high = high << 4 | UInt64(nibble)
                    } else {
                        low = low << 4 | UInt64(nibble)
                    }
                    digits += 1
                }
                return true
            }
            guard parsed else { return nil }
            self.high = high
            self.low = low
        }
    }

    /// Distinct ids counted at most; 0 counts nothing.
    var limit: Int
    private var seen: Set<ID> = []
    /// Acceptances beyond the first, for the ids accepted more than once.
    private var again: [ID: Int] = [:]
    private var extra = 0
    private var untracked = 0

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    /// One device push answered 200; `apnsID` is the id the request carried, if any.
    mutating func accept(_ apnsID: String?) {
        guard let apnsID, let id = ID(apnsID) else {
            untracked += 1
            return
        }
        if seen.contains(id) {
            again[id, default: 0] += 1
            extra += 1
        } else if seen.count < limit {
            seen.insert(id)
        } else {
            untracked += 1
        }
    }

    /// How many times the push with this `apns-id` was accepted (0 for an id not tracked).
    func acceptances(of apnsID: String) -> Int {
        guard let id = ID(apnsID), seen.contains(id) else { return 0 }
        return 1 + (again[id] ?? 0)
    }

    var summary: RepeatedAcceptances {
        RepeatedAcceptances(ids: again.count, extra: extra, tracked: seen.count, untracked: untracked)
    }

    mutating func removeAll() {
        seen.removeAll()
        again.removeAll()
        extra = 0
        untracked = 0
    }
}
