import Crypto
import Foundation
import NoteSyncProtocol

/// Splits a file into the protocol's chunks (``ChunkRules/chunkSize``, the last shorter) as it reads it: one chunk in
/// memory at a time, each with its content address (SHA-256), and the whole file's SHA-256 on the way.
///
/// With a ``sealing`` (an encrypted account's), each chunk comes out sealed, addressed by the SHA-256 of its sealed
/// bytes; the whole file's SHA-256 and size stay the plaintext's.
struct Chunker {
    private let handle: FileHandle
    private let file: URL
    let chunkSize: Int
    /// Seals each chunk, when set.
    let sealing: ChunkSealing?
    private var whole = SHA256()
    /// Bytes read so far.
    private(set) var size: Int64 = 0
    /// Chunks read so far.
    private var index = 0

    /// Opens `file` for reading.
    ///
    /// - Throws: `file_access` when it cannot be opened (missing, a directory, no permission).
    init(file: URL, chunkSize: Int = ChunkRules.chunkSize, sealing: ChunkSealing? = nil) throws(NotesError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw NotesError(.fileAccess, "Cannot attach \(file.path): it is a directory.")
        }
        do {
            handle = try FileHandle(forReadingFrom: file)
        } catch {
            throw NotesError(.fileAccess, "Cannot read \(file.path): \(Self.reason(error)).")
        }
        self.file = file
        self.chunkSize = chunkSize
        self.sealing = sealing
    }

    /// The next chunk's address and bytes as stored (sealed with a ``sealing``), nil after the last.
    ///
    /// - Throws: `file_access` when reading fails.
    mutating func next() throws(NotesError) -> (hash: ContentHash, bytes: Data)? {
        var bytes = Data()
        do {
            // A read may return less than asked (a pipe): read on until the chunk is full or the file ends.
            while bytes.count < chunkSize, let piece = try handle.read(upToCount: chunkSize - bytes.count), !piece.isEmpty {
                bytes.append(piece)
            }
        } catch {
            throw NotesError(.fileAccess, "Cannot read \(file.path): \(Self.reason(error)).")
        }
        guard !bytes.isEmpty else { return nil }
        size += Int64(bytes.count)
        whole.update(data: bytes)
        if let sealing { bytes = sealing.seal(bytes, index: index) }
        index += 1
        return (ContentHash(digest: SHA256.hash(data: bytes)), bytes)
    }

    /// After the last chunk: the file's size and SHA-256. Closes the file.
    mutating func finish() -> (size: Int64, sha256: ContentHash) {
        try? handle.close()
        return (size, ContentHash(digest: whole.finalize()))
    }

    static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let posix = (nsError.userInfo[NSUnderlyingErrorKey] as? NSError), posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        if nsError.domain == NSCocoaErrorDomain {
            switch nsError.code {
            case NSFileReadNoSuchFileError, NSFileNoSuchFileError: return "no such file"
            case NSFileReadNoPermissionError: return "permission denied"
            default: break
            }
        }
        return nsError.localizedDescription
    }

    /// A media type for a file name's extension (`image/png`), ``AttachmentManifest/defaultMediaType`` when unknown.
    static func mediaType(forName name: String) -> String {
        let ext = (name as NSString).pathExtension.lowercased()
        return knownTypes[ext] ?? AttachmentManifest.defaultMediaType
    }

    private static let knownTypes: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "svg": "image/svg+xml", "pdf": "application/pdf", "txt": "text/plain", "md": "text/markdown",
        "html": "text/html", "json": "application/json", "csv": "text/csv", "zip": "application/zip", "gz": "application/gzip",
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "wav": "audio/wav", "mp4": "video/mp4", "mov": "video/quicktime",
    ]
}
