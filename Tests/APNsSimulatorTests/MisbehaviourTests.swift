@testable import APNsSimulator
import Testing

/// The device policy and the misbehaviour settings `apns-simulator` and `apns-worker dev` take, without
/// a network: what the registry answers a token, and which flag combinations are refused.
@Suite("Device policy and misbehaviour settings")
struct MisbehaviourTests {
    static let token32 = String(repeating: "ab", count: 32)

    @Test("acceptLength(bytes: 32): a 32-byte token is delivered, a 2-byte or 33-byte one gets 400 BadDeviceToken")
    func tokenLength() {
        let registry = DeviceRegistry(policy: .acceptLength(bytes: 32))
        #expect(registry.verdict(token: Self.token32, topic: "com.example", environment: .production) == .deliver)
        for token in ["abcd", Self.token32 + "00"] {
            #expect(
                registry.verdict(token: token, topic: "com.example", environment: .production)
                    == .reject(.badDeviceToken))
        }
    }

    @Test("unregister(fraction:): about that share of made-up tokens gets 410, each token the same answer every time")
    func unregisteredShare() {
        let registry = DeviceRegistry(policy: .accept)
        registry.unregister(fraction: 0.25, since: 1_700_000_000)
        // From 1: the all-zero token is never delivered (no device has it).
        let tokens = (1...2000).map { (i: UInt64) -> String in
            let hex = String(i &* 0x9E37_79B9_7F4A_7C15, radix: 16)
            return String(repeating: "0", count: 64 - hex.count) + hex
        }
        let gone = tokens.filter {
            registry.verdict(token: $0, topic: "t", environment: .production) == .unregistered(since: 1_700_000_000)
        }
        #expect((400...600).contains(gone.count), "\(gone.count) of 2000")
        let again = tokens.filter {
            registry.verdict(token: $0, topic: "t", environment: .production) != .deliver
        }
        #expect(again == gone)
        registry.unregister(fraction: 0, since: 0)
        #expect(tokens.allSatisfy { registry.verdict(token: $0, topic: "t", environment: .production) == .deliver })
    }

    @Test("throttle and fault shares become TooManyRequests, InternalServerError and ServiceUnavailable rates")
    func rates() {
        var settings = SimulatorMisbehaviour()
        settings.throttleFraction = 0.2
        settings.faultFraction = 0.1
        #expect(settings.rates == [.tooManyRequests: 0.2, .internalServerError: 0.05, .serviceUnavailable: 0.05])
        #expect(settings.problems.isEmpty)
    }

    @Test("a share outside 0...1, shares adding up past 1, a token not in hex are problems")
    func problems() throws {
        var settings = SimulatorMisbehaviour()
        settings.throttleFraction = 1.5
        #expect(settings.problems.contains { $0.hasPrefix("--throttle-fraction") })
        settings.throttleFraction = 0.7
        try settings.addFault("ServiceUnavailable=0.5")
        #expect(settings.problems.contains { $0.contains("add up to") })
        settings = SimulatorMisbehaviour()
        try settings.addUnregistered("xyz")
        #expect(settings.problems.contains { $0.hasPrefix("--unregistered") && !$0.contains("xyz") })
        #expect(throws: APNsSimulatorConfigurationError.self) { try settings.addFault("NoSuchReason=0.1") }
    }
}
