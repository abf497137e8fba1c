/// The release this simulator is (`apns-simulator --version`). The simulator ships with the worker
/// and shares its version number, kept here on its own because it shares no code with the worker.
public enum SimulatorVersion {
    public static let current = "0.1.0"
}
