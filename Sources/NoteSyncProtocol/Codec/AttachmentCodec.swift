import Foundation

// The hand-written codecs of a note's attachments, both ways: a set of manifests and a list of chunk addresses, as
// NoteCodec.swift and PushCodec.swift write and read them inside a change, a record and a push result. Same contract
// as every codec here: the writer writes the bytes `WireJSON.encoder()` writes, the readers read the common shape and
// give up (nil) on anything else, which goes to `JSONDecoder`.
//
// Both the writer and the reader switch over every key of ``AttachmentManifest/CodingKeys``: a field added to the
// manifest does not compile until it is written and read here too.

/// The key table of a manifest.
enum AttachmentKeys {
    static let manifest = KeyTable<AttachmentManifest.CodingKeys>()
}

extension JSONByteWriting {
    /// A JSON array of manifests, each as `WireJSON.encoder()` writes it (its fields in declaration order).
    func manifests(_ manifests: [AttachmentManifest]) {
        let keys = AttachmentKeys.manifest
        bytes.append(UInt8(ascii: "["))
        for (index, manifest) in manifests.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "{"))
            for (position, key) in AttachmentManifest.CodingKeys.allCases.enumerated() {
                if key == .key && manifest.key == nil { continue }  // absent, as `WireJSON.encoder()` leaves a nil out
                field(keys.quoted(key), first: position == 0)
                switch key {
                case .name: string(manifest.name)
                case .size: integer(manifest.size)
                case .mediaType: string(manifest.mediaType)
                case .chunkSize: integer(Int64(manifest.chunkSize))
                case .chunks: hashes(manifest.chunks)
                case .sha256: string(manifest.sha256.hex)
                case .key: string(manifest.key ?? "")
                }
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A JSON array of content addresses.
    func hashes(_ hashes: [ContentHash]) {
        bytes.append(UInt8(ascii: "["))
        for (index, hash) in hashes.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(hash.hex)
        }
        bytes.append(UInt8(ascii: "]"))
    }
}

extension AttachmentManifest {
    /// About the bytes ``JSONByteWriting/manifests(_:)`` writes for `manifests` (a capacity hint).
    static func estimatedBytes(_ manifests: [AttachmentManifest]?) -> Int {
        (manifests ?? []).reduce(2) { $0 + 200 + $1.name.utf8.count + $1.mediaType.utf8.count + 67 * $1.chunks.count }
    }

    /// Reads one manifest (known keys once each, every field present; `null` refused). It is not validated: a
    /// request's reader checks the set with ``AttachmentRules``.
    static func read(_ reader: inout JSONByteReader) -> AttachmentManifest? {
        var name: String?, size: Int64?, mediaType: String?, chunkSize: Int?, chunks: [ContentHash]?, sha256: ContentHash?, fileKey: String?
        var seen: UInt32 = 0
        let complete = reader.object { reader, key in
            guard let (key, bit) = AttachmentKeys.manifest.match(key), seen & bit == 0 else { return false }
            seen |= bit
            switch key {
            case .name: name = reader.string(); return name != nil
            case .size: size = reader.integer(); return size != nil
            case .mediaType: mediaType = reader.string(); return mediaType != nil
            case .chunkSize: chunkSize = reader.integer().flatMap { Int(exactly: $0) }; return chunkSize != nil
            case .chunks: chunks = reader.hashes(); return chunks != nil
            case .sha256: sha256 = reader.string().flatMap { ContentHash($0) }; return sha256 != nil
            case .key: fileKey = reader.string(); return fileKey != nil
            }
        }
        guard complete, let name, let size, let mediaType, let chunkSize, let chunks, let sha256 else { return nil }
        return AttachmentManifest(
            name: name, size: size, mediaType: mediaType, chunkSize: chunkSize, chunks: chunks, sha256: sha256, key: fileKey)
    }
}

extension JSONByteReader {
    /// Reads an array of manifests (nil gives up).
    mutating func manifests() -> [AttachmentManifest]? {
        array { AttachmentManifest.read(&$0) }
    }

    /// Reads a set of attachments a request carries: nil (giving up, so that `JSONDecoder` refuses it naming the
    /// field) when it breaks ``AttachmentRules``.
    mutating func validManifests() -> [AttachmentManifest]? {
        manifests().flatMap { AttachmentRules.violation(in: $0) == nil ? $0 : nil }
    }

    /// Reads an array of content addresses (nil gives up, on anything that is not one).
    mutating func hashes() -> [ContentHash]? {
        array { $0.string().flatMap { ContentHash($0) } }
    }
}
