import Testing

@testable import Worker

@Suite("Credential shares: who runs and who waits per credential")
struct CredentialSharesTests {
    typealias Queues = CredentialShares.Queues<Int>

    @Test("a credential runs up to its cap; the next ones park, the other credential still runs")
    func capPerCredential() {
        var queues = Queues(cap: 2)
        #expect(queues.enter("a", 1) && queues.enter("a", 2))
        #expect(!queues.enter("a", 3) && !queues.enter("a", 4), "over a's cap: parked")
        #expect(queues.enter("b", 5) && queues.enter("b", 6), "b has its own share")
        #expect(queues.parked == 2)
        #expect(queues.running == ["a": 2, "b": 2])
    }

    @Test(
        "an ended event's place goes to its credential's first parked one, in arrival order; none parked: the count falls"
    )
    func leaveStartsTheNextInOrder() {
        var queues = Queues(cap: 1)
        _ = queues.enter("a", 1)
        _ = queues.enter("a", 2)
        _ = queues.enter("a", 3)
        _ = queues.enter("b", 4)
        #expect(queues.leave("b") == nil, "b had none parked")
        #expect(queues.running == ["a": 1])
        #expect(queues.leave("a") == 2)
        #expect(queues.leave("a") == 3)
        #expect(queues.parked == 0 && queues.running == ["a": 1], "3 runs in 1's place")
        #expect(queues.leave("a") == nil)
        #expect(queues.running.isEmpty)
    }

    @Test(
        "parked events taken out (their partition handed over) leave the others queued in order, and the counts right")
    func removeParked() {
        var queues = Queues(cap: 1)
        for item in 1...6 { _ = queues.enter(item % 2 == 0 ? "a" : "b", item) }
        // a: 2 runs, 4 and 6 parked; b: 1 runs, 3 and 5 parked.
        let removed = queues.remove { $0 == 4 || $0 == 3 }
        #expect(Set(removed) == [3, 4])
        #expect(queues.parked == 2)
        #expect(queues.running == ["a": 1, "b": 1], "taking parked ones out frees no running place")
        #expect(queues.leave("a") == 6)
        #expect(queues.leave("b") == 5)
        #expect(queues.remove { _ in true }.isEmpty && queues.parked == 0)
    }

    @Test(
        "the configured cap: none with one credential, half the bound by default, the urgent lane the same fraction of its own"
    )
    func configuredCap() {
        var delivery = DeliverySettings()
        delivery.maxInFlight = 10_000
        #expect(delivery.credentialCap(bound: 10_000, credentials: 1) == nil, "one credential: no one to be fair to")
        #expect(delivery.credentialCap(bound: 10_000, credentials: 3) == 5_000)
        #expect(delivery.credentialCap(bound: 1_000, credentials: 3) == 500, "the urgent lane's bound")
        delivery.maxInFlightPerCredential = 2_500
        #expect(delivery.credentialCap(bound: 10_000, credentials: 2) == 2_500)
        #expect(delivery.credentialCap(bound: 1_000, credentials: 2) == 250)
        delivery.maxInFlightPerCredential = 10_000
        #expect(delivery.credentialCap(bound: 10_000, credentials: 2) == nil, "a cap at the bound is no share")
    }
}
