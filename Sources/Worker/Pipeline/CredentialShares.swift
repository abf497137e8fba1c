import DequeModule

/// Fairness between apps: no credential has more than `cap` events running at once (from their
/// first attempt to done, their waits for a retry included), so that an app whose pushes all wait
/// (a 429 storm, a black-holed connection) holds only its share of the in-flight bound, and the
/// other apps keep the rest. With one credential configured there is no share. An event over its credential's cap waits *parked*, before its first attempt, outside
/// `delivery.maxInFlight` (the pipeline counts it against `delivery.maxParked` instead), and starts
/// when one of its credential's running events ends, in the order it was read.
///
/// The app is known only once the record is decoded, and one partition mixes apps: parking is how
/// the reader gets past one app's records to the others' without reading anything twice. Its room
/// is bounded: once `maxParked` events are parked, input is held for every app as at the in-flight
/// bound (docs/worker.md, "Fairness between apps").
///
/// The pipeline keeps the queues in its state (`WorkerPipeline+Shares.swift`), under the lock that
/// counts what runs, so that a run parked and its credential's next end never cross.
enum CredentialShares {
    /// How many run per credential, and who waits for each, in arrival order.
    struct Queues<Item> {
        let cap: Int
        private(set) var running: [String: Int] = [:]
        private var waiting: [String: Deque<Item>] = [:]
        private(set) var parked = 0

        init(cap: Int) { self.cap = cap }

        /// Runs `item` (true) while its credential is under the cap, or whatever the cap when it may
        /// not park (it is about to be given up); else parks it.
        mutating func enter(_ credential: String, _ item: Item, mayPark: Bool = true) -> Bool {
            let count = running[credential, default: 0]
            if count < cap || !mayPark {
                running[credential] = count + 1
                return true
            }
            waiting[credential, default: []].append(item)
            parked += 1
            return false
        }

        /// One of `credential`'s running items ended; its first parked item, if any, runs instead.
        mutating func leave(_ credential: String) -> Item? {
            if let next = waiting[credential]?.popFirst() {
                if waiting[credential]?.isEmpty == true { waiting[credential] = nil }
                parked -= 1
                return next
            }
            let count = running[credential, default: 0] - 1
            running[credential] = count > 0 ? count : nil
            return nil
        }

        /// Takes out the parked items matching `predicate`, in arrival order per credential.
        mutating func remove(where predicate: (Item) -> Bool) -> [Item] {
            var removed: [Item] = []
            for credential in Array(waiting.keys) {
                guard var queue = waiting[credential] else { continue }
                let before = queue.count
                var kept = Deque<Item>()
                for item in queue {
                    if predicate(item) { removed.append(item) } else { kept.append(item) }
                }
                queue = kept
                parked -= before - queue.count
                waiting[credential] = queue.isEmpty ? nil : queue
            }
            return removed
        }
    }
}
