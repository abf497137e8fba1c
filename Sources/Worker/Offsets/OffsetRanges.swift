/// A set of offsets kept as sorted, disjoint, non-touching ranges: the done offsets above a
/// partition's committed offset, which come in long runs (everything a worker finished while one
/// event waited for a retry).
package struct OffsetRanges: Equatable, Sendable, CustomStringConvertible {
    package private(set) var ranges: [Range<Int64>] = []

    package init(_ ranges: [Range<Int64>] = []) {
        for range in ranges { insert(range) }
    }

    package var isEmpty: Bool { ranges.isEmpty }

    /// How many offsets the set holds.
    package var count: Int64 { ranges.reduce(0) { $0 + Int64($1.count) } }

    package var description: String {
        ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound - 1)" }
            .joined(separator: ",")
    }

    package func contains(_ offset: Int64) -> Bool {
        guard let index = lastIndex(startingAtOrBelow: offset) else { return false }
        return ranges[index].contains(offset)
    }

    mutating func insert(_ offset: Int64) {
        insert(offset..<offset + 1)
    }

    /// Adds `range`, merging it with the ranges it overlaps or touches.
    mutating func insert(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        // Appending past the end is the common case (offsets finish roughly in order).
        if let last = ranges.last, last.upperBound < range.lowerBound {
            ranges.append(range)
            return
        }
        if let last = ranges.last, last.upperBound == range.lowerBound {
            ranges[ranges.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            return
        }
        var lower = range.lowerBound
        var upper = range.upperBound
        // The first range that ends at or after `lower` and the first that starts after `upper`.
        var first = ranges.count
        for (index, existing) in ranges.enumerated() where existing.upperBound >= lower {
            first = index
            break
        }
        var end = first
        while end < ranges.count, ranges[end].lowerBound <= upper {
            lower = min(lower, ranges[end].lowerBound)
            upper = max(upper, ranges[end].upperBound)
            end += 1
        }
        ranges.replaceSubrange(first..<end, with: [lower..<upper])
    }

    /// This set and `other` (sorted by lower bound, disjoint), merged in one pass.
    func union(sorted other: [Range<Int64>]) -> OffsetRanges {
        var merged = OffsetRanges()
        merged.ranges.reserveCapacity(ranges.count + other.count)
        var mine = ranges[...]
        var theirs = other[...]
        while let next = mine.first.map({ first in
            theirs.first.map { $0.lowerBound < first.lowerBound ? $0 : first } ?? first
        })
            ?? theirs.first
        {
            if mine.first == next { mine.removeFirst() } else { theirs.removeFirst() }
            if let last = merged.ranges.last, last.upperBound >= next.lowerBound {
                merged.ranges[merged.ranges.count - 1] = last.lowerBound..<max(last.upperBound, next.upperBound)
            } else {
                merged.ranges.append(next)
            }
        }
        return merged
    }

    /// Drops every offset below `offset`.
    mutating func removeAll(below offset: Int64) {
        while let first = ranges.first, first.lowerBound < offset {
            if first.upperBound <= offset {
                ranges.removeFirst()
            } else {
                ranges[0] = offset..<first.upperBound
            }
        }
    }

    /// Drops every offset at or above `offset`.
    mutating func removeAll(atOrAbove offset: Int64) {
        while let last = ranges.last, last.upperBound > offset {
            if last.lowerBound >= offset {
                ranges.removeLast()
            } else {
                ranges[ranges.count - 1] = last.lowerBound..<offset
            }
        }
    }

    /// Keeps the first `count` ranges.
    func prefix(_ count: Int) -> OffsetRanges {
        var kept = OffsetRanges()
        kept.ranges = Array(ranges.prefix(count))
        return kept
    }

    private func lastIndex(startingAtOrBelow offset: Int64) -> Int? {
        var low = 0
        var high = ranges.count - 1
        var found: Int?
        while low <= high {
            let middle = (low + high) / 2
            if ranges[middle].lowerBound <= offset {
                found = middle
                low = middle + 1
            } else {
                high = middle - 1
            }
        }
        return found
    }
}
