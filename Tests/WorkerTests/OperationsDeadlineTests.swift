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

    // A response that never drained had no deadline: the connection and its answers stayed for good.
    @Test("a client that stops reading is stalled for the tracker while answered, and the deadline stays")
    func stalled() {
        var machine = Machine()
        #expect(machine.requestReceived() == Machine.Action(arm: .write, phase: .answering))
        #expect(machine.writabilityChanged(isWritable: false) == Machine.Action(phase: .stalled))
        #expect(machine.requestReceived() == .none, "the older answer's write deadline runs on")
        #expect(machine.writabilityChanged(isWritable: true) == Machine.Action(phase: .answering))
        #expect(machine.writabilityChanged(isWritable: false) == Machine.Action(phase: .stalled))
        #expect(machine.responseSent() == Machine.Action(arm: .write))
        #expect(machine.writabilityChanged(isWritable: true) == Machine.Action(phase: .answering))
        #expect(machine.responseSent() == Machine.Action(arm: .idle, phase: .idle))
        // Between requests writability says nothing to the tracker.
        #expect(machine.writabilityChanged(isWritable: false) == .none)
        #expect(machine.requestReceived() == Machine.Action(arm: .write, phase: .stalled))
    }
}
