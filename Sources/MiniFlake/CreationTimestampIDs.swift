/// The creation timestamp as an ID: the scheme of a 2014 sync diary, kept for comparison and compatibility. Never
/// FlakeNotes' default; see Docs/MINIFLAKE.md ("Other ID schemes") for what it costs.
///
/// An object's ID is its creation time in Unix milliseconds, "unique for a given person" on the assumption that one
/// person never creates two objects in one millisecond. Faithful to that, it keeps no state: two IDs made in the
/// same millisecond (a burst, an import, two devices of one person) are equal, and a clock set back makes again the
/// IDs of the milliseconds it returns to.
///
/// The IDs are positive `Int64`s of about 1.8 × 10^12 today, so they are valid MiniFlake values on the wire (read as
/// MiniFlake, their timestamp falls in the first minutes of March 2018; it means nothing). Their decimal form has 13
/// digits until the year 2286, so `FlakeID(parsing:)` reads that text as base32: use ``FlakeID/init(_:)`` (strict
/// decimal) for it.
public struct CreationTimestampIDs<Clock: FlakeClock>: Sendable {
    private let clock: Clock

    /// IDs reading `clock`.
    public init(clock: Clock) {
        self.clock = clock
    }

    /// The clock's reading in Unix milliseconds, as an ID.
    ///
    /// - Throws: ``FlakeError/zero`` or ``FlakeError/negative(_:)`` for a clock at or before 1970.
    public func next() throws(FlakeError) -> FlakeID {
        try Self.id(createdAt: clock.unixMilliseconds())
    }

    /// The ID of an object created at `unixMilliseconds`.
    ///
    /// - Throws: ``FlakeError/zero`` or ``FlakeError/negative(_:)`` for a time at or before 1970.
    public static func id(createdAt unixMilliseconds: Int64) throws(FlakeError) -> FlakeID {
        try FlakeID(validating: unixMilliseconds)
    }
}
