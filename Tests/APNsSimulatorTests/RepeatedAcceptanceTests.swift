@testable import APNsSimulator
import Foundation
import Testing

@Suite("Device pushes accepted more than once, by apns-id")
struct RepeatedAcceptanceTests {
    let key = TestSigningKey()
    static let first = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    static let second = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

    func push(_ client: RawHTTP2Client, _ stream: Int, apnsID: String?, token: String = Fixture.device) {
        client.send(
            stream: stream,
            headers: RawHTTP2Client.apnsHeaders(
                token: token, authorization: key.authorization(), extra: apnsID.map { [("apns-id", $0)] } ?? []))
    }

    // MARK: The counter alone

    @Test("an id accepted again counts once in ids and once per extra acceptance, in either case")
    func counterCountsIDsAndExtraAcceptances() {
        var counter = AcceptedIDCounter(limit: 10)
        counter.accept(Self.first)
        counter.accept(Self.second)
        #expect(counter.summary == RepeatedAcceptances(ids: 0, extra: 0, tracked: 2, untracked: 0))
        counter.accept(Self.first.uppercased())
        counter.accept(Self.first)
        #expect(counter.summary == RepeatedAcceptances(ids: 1, extra: 2, tracked: 2, untracked: 0))
        #expect(counter.acceptances(of: Self.first) == 3)
        #expect(counter.acceptances(of: Self.second) == 1)
        #expect(counter.acceptances(of: "00000000-0000-4000-8000-000000000000") == 0)
        counter.removeAll()
        #expect(counter.summary == RepeatedAcceptances())
    }

    @Test("no id, or no UUID, is untracked; past the limit new ids are untracked and known ones still counted")
    func counterUntrackedAndLimit() {
        var counter = AcceptedIDCounter(limit: 1)
        counter.accept(nil)
        counter.accept("not-a-uuid")
        counter.accept("3f2504e0_4f89_41d3_9a0c_0305e82c3301")
        counter.accept(Self.first)
        counter.accept(Self.second)
        counter.accept(Self.second)
        counter.accept(Self.first)
        #expect(counter.summary == RepeatedAcceptances(ids: 1, extra: 1, tracked: 1, untracked: 5))
    }

    @Test("ids are read as their 128 bits: the hyphens' places and every digit matter")
    func idParsing() {
        #expect(AcceptedIDCounter.ID(Self.first) == AcceptedIDCounter.ID(Self.first.uppercased()))
        #expect(AcceptedIDCounter.ID(Self.first) != AcceptedIDCounter.ID(Self.second))
        #expect(AcceptedIDCounter.ID("3f2504e04f8941d39a0c0305e82c3301") == nil)
        #expect(AcceptedIDCounter.ID("3f2504e0-4f89-41d3-9a0c-0305e82c330") == nil)
        #expect(AcceptedIDCounter.ID("3f2504e0-4f89-41d3-9a0c-0305e82c330g") == nil)
        let id = AcceptedIDCounter.ID("00000000-0000-0000-0000-000000000001")
        #expect(id?.high == 0 && id?.low == 1)
    }

    // MARK: Through the simulator

    @Test("the same apns-id answered 200 twice is one push accepted twice; refused and id-less pushes are not")
    func acceptedTwiceOverTheWire() async throws {
        try await withRawConnection(key: key) { (simulator: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1, apnsID: Self.first)
            #expect(try await client.response(stream: 1).status == 200)
            push(client, 3, apnsID: Self.first)
            #expect(try await client.response(stream: 3).status == 200)
            push(client, 5, apnsID: Self.second)
            #expect(try await client.response(stream: 5).status == 200)
            // Refused twice (410 Unregistered): nothing was delivered, nothing counted.
            push(client, 7, apnsID: Self.second, token: Fixture.goneDevice)
            #expect(try await client.response(stream: 7).status == 410)
            // No apns-id: APNs makes one up for each, a second sending cannot be told apart.
            push(client, 9, apnsID: nil)
            #expect(try await client.response(stream: 9).status == 200)
            push(client, 11, apnsID: nil)
            #expect(try await client.response(stream: 11).status == 200)
            let repeated = simulator.observation.repeatedAcceptances
            #expect(repeated == RepeatedAcceptances(ids: 1, extra: 1, tracked: 2, untracked: 2))
            #expect(simulator.observation.acceptances(apnsID: Self.first) == 2)
            #expect(simulator.observation.acceptances(apnsID: Self.second) == 1)
            #expect(simulator.observation.summary().hasSuffix("accepted twice 1 apns-ids 1 extra"))
            simulator.observation.reset()
            #expect(simulator.observation.repeatedAcceptances == RepeatedAcceptances())
        }
    }

    @Test("a push whose 200 was held back when its connection closed counts as accepted: sent again, it is twice")
    func acceptedWithoutAnswerThenSentAgain() async throws {
        try await withSimulator(key: key) { simulator, _ in
            try await withClientGroup { group in
                let lost = try await RawHTTP2Client.connect(
                    group: group, port: simulator.port, caPath: simulator.certificateAuthorityPath!)
                // The first request lifts the one-stream limit of a token connection.
                push(lost, 1, apnsID: Self.second)
                #expect(try await lost.response(stream: 1).status == 200)
                simulator.faults.latency = .fixed(.seconds(30))
                push(lost, 3, apnsID: Self.first)
                push(lost, 5, apnsID: Self.first, token: Fixture.goneDevice)
                #expect(
                    try await eventually {
                        simulator.observation.liveStreams == 2
                    })
                let open = await simulator.connections()
                #expect(open.count == 1)
                #expect(open.first?.acceptedPushes == 2)
                #expect(open.first?.acceptancesAwaitingAnswer == 1, "the 410 held back is not an acceptance")
                await lost.close()
                #expect(try await eventually { simulator.observation.liveConnections == 0 })
                #expect(await simulator.connections().isEmpty)

                simulator.faults.latency = .none
                let again = try await RawHTTP2Client.connect(
                    group: group, port: simulator.port, caPath: simulator.certificateAuthorityPath!)
                push(again, 1, apnsID: Self.first)
                #expect(try await again.response(stream: 1).status == 200)
                let snapshot = await simulator.connections()
                #expect(snapshot.map(\.acceptancesAwaitingAnswer) == [0])
                #expect(snapshot.first.map { $0.id > open.first!.id } == true, "a later connection has a higher id")
                await again.close()
                #expect(simulator.observation.acceptances(apnsID: Self.first) == 2)
                #expect(simulator.observation.repeatedAcceptances.ids == 1)
            }
        }
    }

    @Test("with apnsIDLimit 0 nothing is counted")
    func countingOff() async throws {
        try await withRawConnection(key: key, { $0.apnsIDLimit = 0 }) {
            (simulator: Simulator, client: RawHTTP2Client) async throws in
            push(client, 1, apnsID: Self.first)
            #expect(try await client.response(stream: 1).status == 200)
            push(client, 3, apnsID: Self.first)
            #expect(try await client.response(stream: 3).status == 200)
            #expect(simulator.observation.repeatedAcceptances == RepeatedAcceptances())
            #expect(!simulator.observation.summary().contains("accepted twice"))
            simulator.observation.apnsIDLimit = 10
            push(client, 5, apnsID: Self.first)
            #expect(try await client.response(stream: 5).status == 200)
            #expect(simulator.observation.repeatedAcceptances.tracked == 1)
        }
    }
}
