import NoteSyncProtocol

/// Formats times the way the protocol does (ISO 8601 UTC with milliseconds), for JSON output.
public enum NotesTime {
    public static func iso8601(unixMilliseconds: Int64) -> String {
        WireTime.format(unixMilliseconds: unixMilliseconds)
    }
}
