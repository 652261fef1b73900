import Foundation
import Logging

/// Sets the process's log handler once: swift-log's text stream or ``JSONLogHandler``, on standard error, at `level`.
func bootstrapLogging(format: LogFormat, level: Logger.Level) {
    LoggingSystem.bootstrap { label in
        switch format {
        case .text:
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        case .json:
            var handler = JSONLogHandler(label: label, write: JSONLogHandler.standardError)
            handler.logLevel = level
            return handler
        }
    }
}

/// A swift-log handler writing one JSON object a line: `ts` (ISO 8601 UTC, milliseconds), `level`, `label`,
/// `message`, then every metadata key (the handler's, the logger's and the call's; a key named like one of the four
/// gets a `meta_` prefix). Values are strings, arrays or objects, as swift-log's metadata holds them.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let write: @Sendable (String) -> Void

    /// - Parameter write: Receives each line, newline included.
    public init(label: String, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.write = write
    }

    /// Writes to standard error (one `write(2)` a line, so lines of concurrent tasks never interleave).
    public static let standardError: @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data(line.utf8))
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        var object: [String: Any] = [
            "ts": Self.timestamp(Date()), "level": event.level.rawValue, "label": label, "message": "\(event.message)",
        ]
        for (key, value) in merged {
            let name = object[key] == nil ? key : "meta_\(key)"
            object[name] = Self.json(value)
        }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        write(String(decoding: data, as: UTF8.self) + "\n")
    }

    static func json(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): text
        case .stringConvertible(let value): value.description
        case .array(let values): values.map(json)
        case .dictionary(let values): values.mapValues(json)
        }
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
