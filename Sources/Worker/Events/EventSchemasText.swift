/// The embedded schema texts, for tools that show or extend them (`--schema` files can `$ref` them
/// by `$id`).
public enum EventSchemasText {
    public static var notification: String { EventSchemas.notificationEventText }
    public static var result: String { EventSchemas.resultEventText }
}
