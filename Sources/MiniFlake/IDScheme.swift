/// The ways a client can mint its 64-bit client IDs: MiniFlake (FlakeNotes' own, the default) and two schemes kept
/// for comparison and compatibility with other apps' clients (``CDCounter``, ``CreationTimestampIDs``).
///
/// The raw values are what the tools take (`notes-sim --id-scheme`, `miniflake collisions`).
public enum IDScheme: String, CaseIterable, Codable, Sendable {
    /// ``FlakeMaker``: milliseconds, sequence and instance; never repeats within a generator.
    case miniflake
    /// ``CDCounter``: a per-run counter starting at Unix seconds × 1,000,000.
    case cdcounter
    /// ``CreationTimestampIDs``: the creation time in Unix milliseconds.
    case timestamp

    /// One line for people.
    public var summary: String {
        switch self {
        case .miniflake: "MiniFlake: milliseconds since 2018, sequence, instance"
        case .cdcounter: "CDCounter: a counter per run from Unix seconds × 1,000,000"
        case .timestamp: "creation timestamp: Unix milliseconds"
        }
    }
}
