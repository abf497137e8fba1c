import Kafka

/// The W3C trace context (Trace Context Level 1: `traceparent`, `tracestate`) of a consumed record,
/// carried into its result record and its dead letter's degraded form, so that downstream can
/// continue the trace of the request that produced the event. The full dead letter keeps every
/// header of its record as it was, this one included; a replayed dead letter is that record again,
/// so its new result carries the same context.
///
/// Only a well-formed context is carried: a `traceparent` of another version (this worker knows
/// version 00) or not of its form is ignored, with its `tracestate`, and a `tracestate` over the
/// size the specification asks to propagate is dropped while its `traceparent` is kept. Either is
/// counted (`apns_worker_trace_context_ignored_total`); the event is processed as if it had none.
package struct TraceContext: Sendable, Equatable {
    package static let parentHeader = "traceparent"
    package static let stateHeader = "tracestate"
    /// The longest `tracestate` carried, in bytes: what the specification asks every platform to
    /// propagate at least; its members: at most 32.
    static let stateLimit = 512
    static let stateMembersLimit = 32

    /// Why a record's trace context (or part of it) was not carried.
    package enum Ignored: String, Sendable, CaseIterable {
        /// `traceparent` is not `00-<32 hex>-<16 hex>-<2 hex>`, or its trace or parent id is all zeros.
        case malformedParent = "malformed-traceparent"
        /// `traceparent` has a version other than 00.
        case unsupportedVersion = "unsupported-version"
        /// `tracestate` is over 512 bytes or 32 members, or not of its form: dropped, `traceparent` kept.
        case badState = "bad-tracestate"
    }

    /// The headers to carry: `traceparent`, then `tracestate` if there is one to carry; empty when none.
    package var headers: [KafkaHeader] = []
    package var ignored: Ignored?

    /// The context of a record with `headers` (the last of each header, as Kafka clients read them).
    package init(headers source: [KafkaHeader]) {
        // Most records carry no trace context: one pass over their (few) header keys.
        guard let parent = source.last(Self.parentHeader) else { return }
        if let problem = Self.problem(parent: parent) {
            ignored = problem
            return
        }
        headers.append(KafkaHeader(key: Self.parentHeader, value: parent))
        guard let state = source.last(Self.stateHeader), !state.isEmpty else { return }
        if Self.isCarried(state: state) {
            headers.append(KafkaHeader(key: Self.stateHeader, value: state))
        } else {
            ignored = .badState
        }
    }

    static func problem(parent: [UInt8]) -> Ignored? {
        // version "-" trace-id "-" parent-id "-" flags, lower-case hex.
        guard parent.count >= 2, parent[0..<2].allSatisfy(isLowerHex) else { return .malformedParent }
        guard parent[0] == UInt8(ascii: "0"), parent[1] == UInt8(ascii: "0") else {
            // "ff" is invalid in every version; any other version is one this worker does not know.
            return parent[0] == UInt8(ascii: "f") && parent[1] == UInt8(ascii: "f")
                ? .malformedParent : .unsupportedVersion
        }
        guard parent.count == 55, parent[2] == dash, parent[35] == dash, parent[52] == dash else {
            return .malformedParent
        }
        let traceID = parent[3..<35]
        let parentID = parent[36..<52]
        let flags = parent[53..<55]
        guard traceID.allSatisfy(isLowerHex), parentID.allSatisfy(isLowerHex), flags.allSatisfy(isLowerHex),
            traceID.contains(where: { $0 != zero }), parentID.contains(where: { $0 != zero })
        else { return .malformedParent }
        return nil
    }

    /// A `tracestate` within the size to propagate, of printable ASCII (no control character, no
    /// byte above 0x7E), with at most 32 members each of the form `key=value`.
    static func isCarried(state: [UInt8]) -> Bool {
        guard state.count <= stateLimit, state.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }) else { return false }
        let members = state.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true)
            .filter { !$0.allSatisfy { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") } }
        guard members.count <= stateMembersLimit else { return false }
        return members.allSatisfy { $0.contains(UInt8(ascii: "=")) }
    }

    private static let dash = UInt8(ascii: "-")
    private static let zero = UInt8(ascii: "0")
    private static func isLowerHex(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
    }
}
