import APNs
import JSONSchema
import TestPeers
import Testing
import Worker

@Suite("notification events: send-time rules and damaged input")
struct NotificationEventRobustnessTests {
    @Test("location pushes need token authentication: checked against the connection, at /pushType")
    func locationNeedsTokenAuthentication() throws {
        let event = try NotificationEventDecoder.standard.decode(
            EventFixtures.event([
                "pushType": "location", "topic": "com.example.app.location-query", "payload": ["aps": [:]],
            ]))
        let notification = try event.deviceNotification
        try notification.validate(for: .token)
        do {
            try notification.validate(for: .certificate)
            Issue.record("a location push was accepted for certificate authentication")
        } catch {
            #expect(error.code == .tokenAuthenticationRequired)
            #expect(EventProblem.pointer(for: error.field) == "/pushType")
        }
    }

    /// A small deterministic generator, so a failure reproduces (TestPeers').
    typealias SplitMix64 = TestPeers.SplitMix64

    @Test("damaged events never crash; every problem points at something that exists")
    func mutations() throws {
        var random = SplitMix64(state: 20_261_122)
        let original = EventFixtures.event([:])
        var accepted = 0
        var rejected = 0
        for _ in 0..<3_000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let i = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes[i] = UInt8.random(in: 0...255, using: &random)
                case 1: bytes.remove(at: i)
                default: bytes.insert(UInt8.random(in: 0...255, using: &random), at: i)
                }
                if bytes.isEmpty { bytes = [0x20] }
            }
            let problems = NotificationEventDecoder.standard.problems(in: bytes[...])
            if problems.isEmpty {
                accepted += 1
                continue
            }
            rejected += 1
            for problem in problems {
                switch problem.kind {
                case .malformedJSON:
                    #expect(problem.instanceLocation == "")
                    #expect(problem.line != nil && problem.column != nil)
                case .schema, .rule:
                    let value = try JSONParser.parse(bytes)
                    // The location, or for a missing member its parent, exists in the event.
                    #expect(
                        JSONPointer.resolve(problem.instanceLocation, in: value) != nil,
                        "\(problem) in \(String(decoding: bytes, as: UTF8.self))")
                }
            }
        }
        #expect(rejected > 2_000)
        #expect(accepted + rejected == 3_000)
    }
}
