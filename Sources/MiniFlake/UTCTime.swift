/// ISO 8601 UTC with milliseconds (`2026-11-22T10:15:30.123Z`) from a Unix millisecond count, computed from the
/// integer: exact, fast and locale-free (no date formatter). ``FlakeID/timestamp`` writes it, and so does
/// NoteSyncProtocol's `WireTime` for every time on the wire.
public enum UTCTime {
    /// The proleptic Gregorian date of Unix milliseconds (negative: before 1970), and the milliseconds into that day.
    public static func civil(_ ms: Int64) -> (year: Int64, month: Int64, day: Int64, msOfDay: Int64) {
        let (daysRaw, msOfDayRaw) = ms.quotientAndRemainder(dividingBy: 86_400_000)
        var days = daysRaw
        var msOfDay = msOfDayRaw
        if msOfDay < 0 { msOfDay += 86_400_000; days -= 1 }
        // Civil-from-days (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day, msOfDay)
    }

    /// The 24 characters `YYYY-MM-DDTHH:MM:SS.mmmZ` of a time in the years 0–9999, written straight into the
    /// string's bytes; nil for a time outside those years.
    public static func iso8601(unixMilliseconds ms: Int64) -> String? {
        let (year, month, day, msOfDay) = civil(ms)
        guard (0...9999).contains(year) else { return nil }
        return String(unsafeUninitializedCapacity: 24) { buffer in
            func put(_ value: Int64, at offset: Int, width: Int) {
                var value = value
                for i in stride(from: offset + width - 1, through: offset, by: -1) {
                    buffer[i] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10)
                    value /= 10
                }
            }
            put(year, at: 0, width: 4)
            buffer[4] = UInt8(ascii: "-")
            put(month, at: 5, width: 2)
            buffer[7] = UInt8(ascii: "-")
            put(day, at: 8, width: 2)
            buffer[10] = UInt8(ascii: "T")
            put(msOfDay / 3_600_000, at: 11, width: 2)
            buffer[13] = UInt8(ascii: ":")
            put(msOfDay / 60_000 % 60, at: 14, width: 2)
            buffer[16] = UInt8(ascii: ":")
            put(msOfDay / 1000 % 60, at: 17, width: 2)
            buffer[19] = UInt8(ascii: ".")
            put(msOfDay % 1000, at: 20, width: 3)
            buffer[23] = UInt8(ascii: "Z")
            return 24
        }
    }
}
