import Testing

@testable import Worker

@Suite("Commit metadata: the done offsets above a committed offset, checked before they are trusted")
struct CommitMetadataTests {
    @Test("offset ranges merge what touches or overlaps, and answer membership")
    func ranges() {
        var ranges = OffsetRanges()
        for offset: Int64 in [5, 7, 6, 20, 9] { ranges.insert(offset) }
        #expect(ranges.ranges == [5..<8, 9..<10, 20..<21])
        ranges.insert(8..<9)
        #expect(ranges.ranges == [5..<10, 20..<21])
        ranges.insert(3..<25)
        #expect(ranges.ranges == [3..<25])
        ranges.insert(30..<31)
        ranges.insert(1..<2)
        #expect(ranges.ranges == [1..<2, 3..<25, 30..<31])
        #expect(ranges.contains(3) && ranges.contains(24) && !ranges.contains(25) && !ranges.contains(2))
        #expect(ranges.count == 24)
        ranges.removeAll(below: 10)
        #expect(ranges.ranges == [10..<25, 30..<31])
    }

    @Test(
        "what is written reads back the same, reservation included; other offsets and other programs' strings are refused"
    )
    func roundTrip() throws {
        let done = OffsetRanges([101..<150, 152..<153, 1_000..<70_000])
        let written = CommitMetadata(
            committed: 100, done: done,
            reservation: CommitMetadata.Reservation(holder: "pod-7:12:99", expires: 1_800_000_000_000))
        let (text, omitted) = written.encoded()
        #expect(omitted == 0)
        #expect(text.hasPrefix("apns-worker/1 c=100 d="), "\(text)")
        #expect(text.utf8.count < 80, "runs cost bytes, not offsets: \(text)")
        #expect(text.contains(" d="))
        #expect(try CommitMetadata.decode(text, committed: 100) == written)

        #expect(throws: CommitMetadata.Problem.stale(writtenWith: 100)) {
            try CommitMetadata.decode(text, committed: 99)
        }
        #expect(throws: CommitMetadata.Problem.foreign) { try CommitMetadata.decode("{\"pc\":\"x\"}", committed: 100) }
        #expect(throws: CommitMetadata.Problem.foreign) { try CommitMetadata.decode("", committed: 100) }
        let truncated = String(text.dropLast(3))
        #expect(throws: CommitMetadata.Problem.self) { try CommitMetadata.decode(truncated, committed: 100) }
        let altered = text.replacingOccurrences(of: "c=100", with: "c=10")
        #expect(throws: CommitMetadata.Problem.self) { try CommitMetadata.decode(altered, committed: 10) }
        #expect(throws: CommitMetadata.Problem.corrupt("an unknown version")) {
            try CommitMetadata.decode("apns-worker/2 c=100 d= s=00000000", committed: 100)
        }
        // Done offsets below the committed one mean nothing and are not kept.
        #expect(CommitMetadata(committed: 120, done: done).done.ranges.first == 120..<150)
        // The committed offset itself may be named (a progress record of a revocation that could not
        // commit): it reads back.
        let fromItself = CommitMetadata(committed: 7, done: OffsetRanges([7..<9]))
        #expect(try CommitMetadata.decode(fromItself.encoded().text, committed: 7) == fromItself)
    }

    @Test("metadata over the byte budget drops the highest ranges, and says how many offsets it left out")
    func budget() throws {
        // Every other offset done: the worst case for runs.
        var done = OffsetRanges()
        for offset in stride(from: Int64(2), to: 40_000, by: 2) { done.insert(offset) }
        let metadata = CommitMetadata(committed: 1, done: done)
        let (text, omitted) = metadata.encoded(maxBytes: 4096)
        #expect(text.utf8.count <= 4096)
        let kept = try CommitMetadata.decode(text, committed: 1).done
        #expect(kept.count + omitted == done.count)
        #expect(kept.count > 9_000, "a bitmap is chosen where runs are short: \(kept.count)")
        #expect(text.contains(" m="), "\(text.prefix(40))")
        #expect(kept.ranges.last!.upperBound < done.ranges.last!.upperBound, "the top is what goes")
        #expect(kept.ranges == Array(done.ranges.prefix(kept.ranges.count)))
    }

    @Test("scattered done offsets are written as a bitmap when it is shorter, and read back the same")
    func bitmap() throws {
        var done = OffsetRanges([1_001..<1_200])
        for offset in stride(from: Int64(1_201), to: 1_600, by: 3) { done.insert(offset) }
        let metadata = CommitMetadata(committed: 1_000, done: done)
        let (text, omitted) = metadata.encoded()
        #expect(omitted == 0 && text.contains(" m="), "\(text)")
        #expect(try CommitMetadata.decode(text, committed: 1_000) == metadata)
    }

    @Test("a replay cursor's low end moves over what is handled; what a run left alone stays open")
    func replayCursor() {
        var cursor = ReplayCursor(low: 10)
        cursor.startScanning(at: 10)
        cursor.scanned(10, done: true)
        cursor.scanned(11, done: false)  // filtered: stays replayable
        cursor.scanned(12, done: true)
        cursor.scanned(15, done: true)  // 13 and 14 hold nothing (a gap): handled
        #expect(cursor.low == 11)
        #expect(cursor.handled.ranges == [12..<16])
        #expect(!cursor.isHandled(11) && cursor.isHandled(10) && cursor.isHandled(14))
        // The next run replays 11: the cursor moves to the end of what was handled.
        var next = ReplayCursor(low: cursor.low, handled: cursor.handled)
        next.startScanning(at: 11)
        next.scanned(11, done: true)
        #expect(next.low == 16 && next.handled.isEmpty)
    }
}
