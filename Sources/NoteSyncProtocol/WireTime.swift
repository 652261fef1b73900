import MiniFlake

/// Times on the wire: ISO 8601 UTC with milliseconds, e.g. `2026-11-22T10:15:30.123Z`.
public enum WireTime {
    /// Formats Unix milliseconds exactly (no Foundation formatter: fast and locale-free, ``UTCTime``).
    public static func format(unixMilliseconds ms: Int64) -> String {
        if let text = UTCTime.iso8601(unixMilliseconds: ms) { return text }
        let (year, month, day, msOfDay) = UTCTime.civil(ms)
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(msOfDay / 3_600_000, 2)):"
            + "\(pad(msOfDay / 60_000 % 60, 2)):\(pad(msOfDay / 1000 % 60, 2)).\(pad(msOfDay % 1000, 3))Z"
    }

    /// Parses the form ``format(unixMilliseconds:)`` writes; nil for anything else.
    public static func parse(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { parse(utf8: $0) }
    }

    private static func parse(utf8 u: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard u.count == 24, u[4] == 45, u[7] == 45, u[10] == 84, u[13] == 58, u[16] == 58, u[19] == 46, u[23] == 90
        else { return nil }
        func num(_ from: Int, _ count: Int) -> Int64? {
            var v: Int64 = 0
            for i in from..<(from + count) {
                let c = u[i]
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            return v
        }
        guard let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2),
            let s = num(17, 2), let ms = num(20, 3), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 60
        else { return nil }
        // Days-from-civil.
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let mp = mo > 2 ? mo - 3 : mo + 9
        let doy = (153 * mp + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let result = ((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms
        // Rejects days past the month's end (2026-02-30 would otherwise be March 2).
        let back = UTCTime.civil(result)
        return back.year == y && back.month == mo && back.day == d ? result : nil
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}

extension WireTime {
    /// Formats times as ``WireTime/format(unixMilliseconds:)`` does, keeping the last one: the notes one push wrote
    /// share their times, so a pull page formats each time once (and the page writer, seeing the same string again,
    /// writes the bytes it kept).
    public struct Cache: Sendable {
        private var last: (unixMilliseconds: Int64, text: String)?

        public init() {}

        /// The wire form of `unixMilliseconds`.
        public mutating func format(unixMilliseconds: Int64) -> String {
            if let last, last.unixMilliseconds == unixMilliseconds { return last.text }
            let text = WireTime.format(unixMilliseconds: unixMilliseconds)
            last = (unixMilliseconds, text)
            return text
        }
    }
}
