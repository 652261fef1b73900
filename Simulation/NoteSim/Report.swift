/// What happened at one step, for the summary, the trace and the HTML timeline.
public struct SimEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case create, edit, delete, sync, signIn, signOut, clockJump, collide, restart, fault, conflict, merge, error, violation,
            revoke, deleteAccount, watch
    }

    public var step: Int
    /// The device, or nil for the server.
    public var device: Int?
    public var kind: Kind
    public var detail: String

    public init(step: Int, device: Int?, kind: Kind, detail: String) {
        self.step = step
        self.device = device
        self.kind = kind
        self.detail = detail
    }
}

/// Writes a self-contained HTML page: one column per device (and one for the server), one row per step, each event
/// a coloured chip with its detail on hover. No scripts or external assets: it opens from a file anywhere.
public enum HTMLReport {
    public static func render(title: String, summary: [(String, String)], devices: Int, steps: Int, events: [SimEvent]) -> String {
        var byCell: [Int: [Int: [SimEvent]]] = [:]  // step -> column -> events
        for event in events {
            byCell[event.step, default: [:]][event.device ?? -1, default: []].append(event)
        }
        var html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title>
            <style>
            body { font: 13px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
            h1 { font-size: 1.3em; }
            table.summary td { padding: 2px 12px 2px 0; }
            table.timeline { border-collapse: collapse; margin-top: 1em; }
            table.timeline th { position: sticky; top: 0; background: #f4f4f4; padding: 4px 8px; border-bottom: 1px solid #ccc; }
            table.timeline td { border-bottom: 1px solid #eee; padding: 2px 6px; vertical-align: top; white-space: nowrap; }
            td.step { color: #888; text-align: right; }
            .chip { display: inline-block; border-radius: 3px; padding: 0 5px; margin: 1px; font-size: 12px; }
            .create { background: #e3f2e1; } .edit { background: #eef3fb; } .delete { background: #f6e0e0; }
            .sync { background: #dcebf7; } .signIn { background: #c9e7c6; font-weight: bold; } .signOut { background: #f3d9a8; font-weight: bold; }
            .clockJump { background: #ead9f2; } .collide { background: #fde2c8; } .restart { background: #ccc; font-weight: bold; }
            .fault { background: #ffd6d6; } .conflict { background: #ffb347; } .merge { background: #b7e4c7; }
            .error { background: #ff8a8a; } .violation { background: #d00; color: #fff; font-weight: bold; }
            </style></head><body>
            <h1>\(escape(title))</h1>
            <table class="summary">
            """
        for (key, value) in summary {
            html += "<tr><td>\(escape(key))</td><td><b>\(escape(value))</b></td></tr>\n"
        }
        html += "</table>\n<table class=\"timeline\"><tr><th>step</th><th>server</th>"
        for d in 0..<devices { html += "<th>device \(d)</th>" }
        html += "</tr>\n"
        for step in byCell.keys.sorted() {
            let cells = byCell[step] ?? [:]
            html += "<tr><td class=\"step\">\(step)</td>"
            for column in -1..<devices {
                html += "<td>"
                for event in cells[column] ?? [] {
                    html += "<span class=\"chip \(event.kind.rawValue)\" title=\"\(escape(event.detail))\">\(escape(label(event)))</span>"
                }
                html += "</td>"
            }
            html += "</tr>\n"
        }
        html += "</table>\n<p>\(steps) steps. Hover a chip for its detail.</p></body></html>\n"
        return html
    }

    static func label(_ event: SimEvent) -> String {
        let short = event.detail.count > 28 ? String(event.detail.prefix(27)) + "…" : event.detail
        return "\(event.kind.rawValue) \(short)"
    }

    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}
