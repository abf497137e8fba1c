/// What happened to every record of the simulated topic, kept by the simulation itself (never by
/// the code under test), and the promises checked against it after every step.
struct Ledger {
    /// Results acknowledged per record (a result, and a dead letter where it failed: one step).
    private(set) var ended: [RecordID: Int] = [:]
    /// Pushes APNs accepted (200) per record: what a person receives.
    private(set) var delivered: [RecordID: Int] = [:]
    /// Records sent with no answer known (the connection lost after the request went out, an answer
    /// that never came): APNs may have delivered them.
    private(set) var maybeDelivered: Set<RecordID> = []
    /// Records whose next push is expected: no member could know they were delivered (their owner
    /// crashed, or let them go without storing what it finished).
    private(set) var allowedAgain: Set<RecordID> = []
    /// The leases each record ended under (a member's instance and the tenure the lease began in):
    /// a record ends once per lease.
    private var endedUnder: Set<LeaseRecord> = []
    /// The members (instances) that ended each record while tracking it.
    private var endedBy: [RecordID: Set<Int>] = [:]
    /// Partitions where what was known done was dropped on purpose (commit metadata cut short, done
    /// records refused as untrue): a member may push again what it ended itself there.
    var knowledgeDropped: Set<Int32> = []
    private(set) var violations: [String] = []

    private struct LeaseRecord: Hashable {
        var instance: Int
        var tenure: UInt64
        var record: RecordID
    }

    var pushedTwice: Int { delivered.values.filter { $0 > 1 }.count }

    func hasEnded(_ record: RecordID) -> Bool { ended[record, default: 0] > 0 }

    mutating func violation(_ text: String) {
        violations.append(text)
    }

    /// `tracked`: its lease still tracked the partition's offsets, so the member knows it ended (one
    /// that ends after its revocation gave up waiting for it is not counted anywhere).
    mutating func ended(_ record: RecordID, instance: Int, tenure: UInt64, tracked: Bool, step: Int) {
        ended[record, default: 0] += 1
        if tracked { endedBy[record, default: []].insert(instance) }
        if !endedUnder.insert(LeaseRecord(instance: instance, tenure: tenure, record: record)).inserted {
            violation("step \(step): \(record) ended twice under one lease")
        }
    }

    mutating func delivered(_ record: RecordID, by instance: Int, step: Int) {
        delivered[record, default: 0] += 1
        guard delivered[record]! > 1 else { return }
        if endedBy[record]?.contains(instance) == true, !knowledgeDropped.contains(record.partition) {
            violation("step \(step): member \(instance) pushed \(record) again, which it had ended itself")
        }
        if !allowedAgain.contains(record), !maybeDelivered.contains(record) {
            violation(
                "step \(step): \(record) pushed again (\(delivered[record]!) times) though every owner since its first push knew it was done"
            )
        }
    }

    mutating func sentUnanswered(_ record: RecordID) {
        maybeDelivered.insert(record)
    }

    /// A new owner starts without knowing these records are done: pushing them again is expected
    /// where they were delivered, or may have been, or are at APNs now (`atAPNs`: another member's
    /// requests still unanswered, which may be delivered after the new owner's).
    mutating func allowAgain(_ records: some Sequence<RecordID>, atAPNs: Set<RecordID>) {
        for record in records
        where delivered[record, default: 0] > 0 || maybeDelivered.contains(record) || atAPNs.contains(record) {
            allowedAgain.insert(record)
        }
    }
}
