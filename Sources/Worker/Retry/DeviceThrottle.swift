/// APNs answers 429 TooManyRequests when one device token gets too many notifications in a row.
/// That is about the token, not the connection: every event for that token waits until its time
/// comes, while other tokens go on at full speed.
///
/// Entries expire on their own; `prune` keeps the table bounded whatever the number of tokens seen.
struct DeviceThrottle<Instant: InstantProtocol> where Instant.Duration == Duration {
    private var notBefore: [String: Instant] = [:]
    /// The table never holds more than this many tokens; the oldest deadlines go first.
    let capacity: Int

    init(capacity: Int = 100_000) {
        self.capacity = capacity
    }

    /// A 429 for this token: nothing is sent to it before `now + wait`.
    mutating func throttle(_ token: String, now: Instant, wait: Duration) {
        let until = now.advanced(by: wait)
        if let current = notBefore[token], current >= until { return }
        notBefore[token] = until
        if notBefore.count > capacity { prune(now: now) }
    }

    /// How long an event for this token must still wait, if at all.
    func delay(for token: String, now: Instant) -> Duration? {
        guard let until = notBefore[token], until > now else { return nil }
        return now.duration(to: until)
    }

    var count: Int { notBefore.count }

    /// Drops passed deadlines; if still over capacity, the earliest deadlines, down to 90% of the
    /// capacity so that a steady stream of new tokens does not prune on every insert.
    mutating func prune(now: Instant) {
        notBefore = notBefore.filter { $0.value > now }
        if notBefore.count > capacity {
            let keep = notBefore.sorted { $0.value > $1.value }.prefix(capacity * 9 / 10)
            notBefore = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }
}
