@testable import APNs

extension APNsConnectionPool.StateMachine {
    /// `acquire` for one request, as actions: what the pool's tests read.
    mutating func acquire(_ waiter: Waiter, waiterID: Int, urgent: Bool = false) -> [Action] {
        var actions: [Action] = []
        switch acquire(waiter, waiterID: waiterID, urgent: urgent, connecting: &actions) {
        case .dispatched(let id, let connection): actions.append(.dispatch(waiter, connectionID: id, connection))
        case .waiting: break
        case .refused(let error): actions.append(.fail(waiter, error))
        }
        return actions
    }
}
