import Foundation

/// What a note's set of attachments is, stated once: the server refuses a change breaking these rules, the client
/// checks them before sending, and Docs/PROTOCOL.md and openapi.yaml state the same limits.
///
/// A note holds at most ``maxAttachmentsPerNote`` attachments, each a valid ``AttachmentManifest``
/// (``AttachmentManifest/validate()``), no two with the same name (compared as Swift compares strings: canonically
/// equivalent names are one name, case counts). On the wire a set is a JSON array of manifests in no particular order;
/// the server stores and sends it in ``sorted(_:)`` order.
///
/// One pushed change refers to at most ``maxChunkAddressesPerChange`` chunk addresses, counted over its
/// `attachments`, `baseAttachments` and `chunkRefs` together: so a change always fits a push body of the default
/// `maxBodyBytes` (8 MiB) beside a note of the largest size (50,000 addresses are 3.35 MB of JSON, 48 GiB of file).
public enum AttachmentRules {
    /// Most attachments on one note.
    public static let maxAttachmentsPerNote = 100
    /// Most chunk addresses one change carries (manifests' chunks of `attachments` and `baseAttachments`, and
    /// `chunkRefs`, each counted as often as it appears).
    public static let maxChunkAddressesPerChange = 50_000

    /// The rule in words: what every help text and error message says.
    public static var rule: String {
        "a note has at most \(maxAttachmentsPerNote) attachments, each named once; "
            + "a change refers to at most \(maxChunkAddressesPerChange) chunk addresses"
    }

    /// A set of attachments that breaks the rules: which one (its index, nil for the set as a whole), the manifest
    /// field at fault (nil for the manifest as a whole) and why.
    public struct Violation: Error, Sendable, Equatable, CustomStringConvertible {
        /// The index of the offending manifest in the array, nil when the set as a whole is at fault (too many).
        public var index: Int?
        /// The manifest's field at fault (`name`, `chunks`), nil for the manifest or the set as a whole.
        public var field: String?
        /// A sentence stating the rule broken.
        public var message: String

        public init(index: Int?, field: String? = nil, message: String) {
            self.index = index
            self.field = field
            self.message = message
        }

        public var description: String { message }
    }

    /// The first way `attachments` breaks the rules as a set: too many, a manifest that is not valid, or a name equal
    /// to an earlier one's. Nil when the set is valid.
    public static func violation(in attachments: [AttachmentManifest]) -> Violation? {
        if attachments.count > maxAttachmentsPerNote {
            return Violation(
                index: nil, message: "A note has at most \(maxAttachmentsPerNote) attachments; this set has \(attachments.count).")
        }
        var seen: Set<String> = []
        for (index, manifest) in attachments.enumerated() {
            do {
                try manifest.validate()
            } catch {
                return Violation(index: index, field: error.field, message: error.message)
            }
            guard seen.insert(manifest.name).inserted else {
                return Violation(
                    index: index, field: AttachmentManifest.CodingKeys.name.stringValue,
                    message: "A note names each attachment once: \(manifest.name.debugDescription) is named twice.")
            }
        }
        return nil
    }

    /// How many chunk addresses a change carries (see ``maxChunkAddressesPerChange``).
    public static func chunkAddressCount(attachments: [AttachmentManifest]?, baseAttachments: [AttachmentManifest]?, chunkRefs: [ContentHash]?) -> Int {
        func count(_ manifests: [AttachmentManifest]?) -> Int { (manifests ?? []).reduce(0) { $0 + $1.chunks.count } }
        return count(attachments) + count(baseAttachments) + (chunkRefs?.count ?? 0)
    }

    /// The message of a change over ``maxChunkAddressesPerChange``.
    static func tooManyChunkAddresses(_ count: Int) -> String {
        "A change refers to at most \(maxChunkAddressesPerChange) chunk addresses (attachments, baseAttachments and "
            + "chunkRefs together); this one refers to \(count)."
    }

    /// `attachments` in their canonical order: by name, compared as UTF-8 bytes (how the server stores and sends a
    /// set).
    public static func sorted(_ attachments: [AttachmentManifest]) -> [AttachmentManifest] {
        attachments.sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
    }

    /// Whether two sets hold the same manifests, whatever their order.
    public static func sameSet(_ a: [AttachmentManifest], _ b: [AttachmentManifest]) -> Bool {
        a.count == b.count && Set(a) == Set(b)
    }

    /// Every chunk address the manifests refer to, each once, in address order.
    public static func chunks(of attachments: [AttachmentManifest]) -> [ContentHash] {
        Set(attachments.lazy.flatMap(\.chunks)).sorted()
    }
}
