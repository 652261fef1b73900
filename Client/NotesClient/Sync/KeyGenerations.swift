import MiniFlake
import NoteCrypto
import NoteSyncProtocol

/// The generations of an encrypted account's key a device holds, and how it comes to hold the newer ones
/// (Docs/SECURITY.md, "Rotation"): a pure function from what `GET /v1/account/keys` answered and the secrets this
/// device has at hand (its installation's key pair, and the password or the recovery key while the user types one)
/// to the key ring it stores. Nothing here touches the network or the store.
enum KeyGenerations {
    /// The secrets that open what a keys answer holds.
    struct Openers: Sendable {
        /// This installation's key pair: opens the hand-overs sealed to its session.
        var device: DeviceKeyPair
        /// The password's keys (at sign-in, a password change): open `wrappedKey` and the password hand-overs.
        var password: DerivedKeys?
        /// The recovery key (recovering after an operator's reset): opens `recoveryWrappedKey` (generation 1) and the
        /// recovery hand-overs.
        var recovery: RecoveryKey?
    }

    /// The newest generation `ring` holds with every generation below it: a keys request asks for what comes after it
    /// (0 for no ring, or a ring that lacks generation 1).
    static func contiguous(_ ring: AccountKeyRing?) -> Int64 {
        guard let ring else { return 0 }
        var held: Int64 = 0
        for generation in ring.generations {
            guard Int64(generation) == held + 1 else { break }
            held = Int64(generation)
        }
        return held
    }

    /// `ring` with every generation the keys answer `pages` brings (one or more pages of one request, in order), each
    /// opened and checked, holding every generation from 1 to the account's current one.
    ///
    /// Order: the seeds (the password's `wrappedKey`, the recovery key's generation 1), the chain down (generation g
    /// wrapped by g + 1), the hand-overs up (generation g wrapped by g − 1, sealed to this device, the password or the
    /// recovery key), the chain down again. A chain entry or hand-over this device can open must open; a password
    /// hand-over is tried only for a generation nothing else brought (those sealed before the last password change
    /// are to an older password's public key).
    ///
    /// - Throws: `encryption` naming what did not open (nothing is to be stored then), or the generation no
    ///   hand-over brought (this device was signed out when the account key changed); `bad_response` for an answer
    ///   that is not of its form.
    static func open(_ pages: [AccountKeysResponse], account: FlakeID, ring held: AccountKeyRing?, openers: Openers) throws(NotesError)
        -> AccountKeyRing
    {
        guard let last = pages.last, (1...EncryptionLimits.maxGeneration).contains(last.generation) else {
            throw NotesError.badResponse("a keys answer without a valid generation")
        }
        let current = UInt32(last.generation)
        var ring = held
        func insert(_ key: AccountKey, _ what: String) throws(NotesError) {
            guard key.account == account else {
                throw NotesError(.encryption, "The \(what) is a key of another account; no key was stored.")
            }
            guard var existing = ring else {
                ring = AccountKeyRing(key)
                return
            }
            do {
                try existing.insert(key)
            } catch {
                throw NotesError(.encryption, "The \(what) differs from the key this device holds of that generation; no key was stored.")
            }
            ring = existing
        }
        func blob<T>(_ what: String, _ read: () throws(NoteCryptoError) -> T) throws(NotesError) -> T {
            do { return try read() } catch {
                throw NotesError(.encryption, "The \(what) does not open: \(error.description) No key was stored.")
            }
        }

        if let password = openers.password {
            let wrapped = try blob("account key the server keeps for the password") { () throws(NoteCryptoError) in
                try WrappedAccountKey(text: last.wrappedKey)
            }
            guard wrapped.generation <= current else { throw NotesError.badResponse("a wrapped key newer than the account's generation") }
            try insert(
                try blob("account key (generation \(wrapped.generation)) with this password") { () throws(NoteCryptoError) in
                    try wrapped.unwrap(account: account, with: password.wrapKey)
                }, "account key the password opens")
        }
        if let recovery = openers.recovery {
            guard let text = pages.lazy.compactMap(\.recoveryWrappedKey).first else {
                throw NotesError(.encryption, "The server did not send the account key wrapped by the recovery key; nothing was stored.")
            }
            try insert(
                try blob("account key (generation 1) with this recovery key") { () throws(NoteCryptoError) in
                    try WrappedAccountKey(text: text).unwrap(account: account, with: recovery)
                }, "account key the recovery key opens")
        }

        // Generation g wrapped by g + 1, for every g below the current one: read down from the newest held.
        var chain: [UInt32: WrappedAccountKey] = [:]
        for text in pages.flatMap(\.older) {
            let wrapped = try blob("older account key in the key chain") { () throws(NoteCryptoError) in try WrappedAccountKey(text: text) }
            guard wrapped.wrapperGeneration == wrapped.generation + 1, wrapped.generation < current else {
                throw NotesError.badResponse("a key-chain entry that is not generation g wrapped by g + 1")
            }
            chain[wrapped.generation] = wrapped
        }
        func walkDown() throws(NotesError) {
            for generation in chain.keys.sorted(by: >) {
                guard let wrapped = chain[generation], let holder = ring, holder.key(generation: generation + 1) != nil else { continue }
                try insert(
                    try blob("key-chain entry of generation \(generation)") { () throws(NoteCryptoError) in try wrapped.unwrap(with: holder) },
                    "key-chain entry of generation \(generation)")
            }
        }
        try walkDown()

        // Hand-overs up: generation g, wrapped by g − 1 and sealed to a key pair this device holds.
        func handovers(_ entries: [KeyHandoverEntry], _ what: String) throws(NotesError) -> [UInt32: KeyHandover] {
            var byGeneration: [UInt32: KeyHandover] = [:]
            for entry in entries {
                guard (2...Int64(current)).contains(entry.generation) else {
                    throw NotesError.badResponse("a \(what) hand-over of generation \(entry.generation), past the account's \(current)")
                }
                byGeneration[UInt32(entry.generation)] = try blob("\(what) hand-over of generation \(entry.generation)") {
                    () throws(NoteCryptoError) in try KeyHandover(text: entry.handover)
                }
            }
            return byGeneration
        }
        let toDevice = try handovers(pages.flatMap(\.handovers), "device")
        let toPassword = openers.password == nil ? [:] : try handovers(pages.flatMap(\.passwordHandovers), "password")
        let toRecovery = openers.recovery == nil ? [:] : try handovers(pages.flatMap { $0.recoveryHandovers ?? [] }, "recovery-key")
        if current >= 2 {
            for generation in 2...current {
                guard let holder = ring, holder.key(generation: generation - 1) != nil else { continue }
                if let handover = toDevice[generation] {
                    // Sealed to this session: it must open, and must be the key this device may already hold.
                    try insert(
                        try blob("hand-over of generation \(generation) sealed to this device") { () throws(NoteCryptoError) in
                            try handover.open(with: openers.device, keys: holder)
                        }, "hand-over of generation \(generation) sealed to this device")
                    continue
                }
                guard holder.key(generation: generation) == nil else { continue }
                if let handover = toPassword[generation], let password = openers.password {
                    try insert(
                        try blob("hand-over of generation \(generation) sealed to the password") { () throws(NoteCryptoError) in
                            try handover.open(with: password.passwordKeyPair, keys: holder)
                        }, "hand-over of generation \(generation) sealed to the password")
                } else if let handover = toRecovery[generation], let recovery = openers.recovery {
                    try insert(
                        try blob("hand-over of generation \(generation) sealed to the recovery key") { () throws(NoteCryptoError) in
                            try handover.open(with: recovery, keys: holder)
                        }, "hand-over of generation \(generation) sealed to the recovery key")
                }
            }
        }
        try walkDown()

        guard let ring else {
            throw NotesError(
                .encryption, "This device holds no key of the account and none was handed to it; sign in again with the password.")
        }
        if let missing = (1...current).first(where: { ring.key(generation: $0) == nil }) {
            throw NotesError(
                .encryption,
                "Generation \(missing) of the account key was not handed to this device (it was signed out when the key changed); sign in again with the password. No key was stored.")
        }
        return ring
    }
}
