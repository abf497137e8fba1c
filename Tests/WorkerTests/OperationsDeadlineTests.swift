import Testing

@testable import Worker

@Suite("Operations endpoint deadlines")
struct OperationsDeadlineTests {
    typealias Machine = RequestDeadlineHandler.StateMachine

    @Test("an answer is under the write deadline; kept alive, the connection then idles")
    func answerThenIdle() {
        var machine = Machine()
        #expect(machine.bytesRead() == .none)
        #expect(machine.requestReceived() == Machine.Action(arm: .write, phase: .answering))
        #expect(machine.responseSent() == Machine.Action(arm: .idle, phase: .idle))
        #expect(machine.bytesRead() == Machine.Action(arm: .request))
    }

    @Test("pipelined requests: each answer gets a write time of its own, the next request its request time")
    func pipelined() {
        var machine = Machine()
        #expect(machine.requestReceived() == Machine.Action(arm: .write, phase: .answering))
        #expect(machine.bytesRead() == .none)
        #expect(machine.requestReceived() == .none)
        #expect(machine.responseSent() == Machine.Action(arm: .write))
        #expect(machine.responseSent() == Machine.Action(arm: .request, phase: .idle))
    }
}
