/// The `apns-priority` header. APNs treats a missing header as 10.
public enum APNsPriority: Int, Sendable, Hashable, CaseIterable, Codable {
    /// 10: deliver immediately. Not allowed for background notifications.
    case immediate = 10
    /// 5: deliver based on power considerations on the device.
    case powerConsidered = 5
    /// 1: prioritise the device's power over everything; never wake the device.
    case lowPower = 1
}
