/// One live connection of the simulator, as ``Simulator/connections()`` reads it.
public struct ConnectionSnapshot: Sendable, Equatable {
    /// The connection's id, as ``NotificationRecord/connectionID`` names it; ids grow with each
    /// connection accepted, so a connection opened later has a higher one.
    public var id: Int
    /// Device pushes accepted (answered 200) on it so far.
    public var acceptedPushes: Int
    /// Device pushes accepted whose 200 is still held back by injected latency: APNs has taken them,
    /// and the client does not know yet. A client that goes away now never learns of them; sending them
    /// again is a second push to the device.
    public var acceptancesAwaitingAnswer: Int

    public init(id: Int, acceptedPushes: Int, acceptancesAwaitingAnswer: Int) {
        self.id = id
        self.acceptedPushes = acceptedPushes
        self.acceptancesAwaitingAnswer = acceptancesAwaitingAnswer
    }
}
