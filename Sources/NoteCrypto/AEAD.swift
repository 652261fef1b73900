import CSodium

/// XChaCha20-Poly1305-IETF (`crypto_aead_xchacha20poly1305_ietf_*`): the one authenticated cipher of NoteCrypto.
///
/// 32-byte keys, 24-byte nonces (random: at that size a collision is negligible however many blobs one key seals,
/// so no counter is kept anywhere), 16-byte tags. Callers write the nonce into their blob themselves.
enum AEAD {
    static let keyByteCount = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    static let nonceByteCount = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    static let tagByteCount = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// Appends `plaintext`'s ciphertext and tag to `output` (which holds the blob's header and nonce so far).
    static func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: [UInt8], nonce: [UInt8], key: SecretBytes, appendingTo output: inout [UInt8]
    ) {
        precondition(key.count == keyByteCount && nonce.count == nonceByteCount)
        let start = output.count
        let sealedCount = plaintext.count + tagByteCount
        output.append(contentsOf: repeatElement(0, count: sealedCount))
        var written: UInt64 = 0
        let status = output.withUnsafeMutableBufferPointer { buffer in
            associatedData.withUnsafeBufferPointer { ad in
                nonce.withUnsafeBufferPointer { nonce in
                    key.withKeyPointer { key in
                        crypto_aead_xchacha20poly1305_ietf_encrypt(
                            buffer.baseAddress! + start, &written,
                            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                            ad.baseAddress, UInt64(ad.count), nil, nonce.baseAddress!, key)
                    }
                }
            }
        }
        precondition(status == 0 && written == UInt64(sealedCount), "crypto_aead_xchacha20poly1305_ietf_encrypt failed")
    }

    /// Writes `plaintext`'s ciphertext and tag into `sealed`, exactly `plaintext.count + tagByteCount` bytes (for
    /// large blobs such as attachment chunks: nothing is appended or zeroed first).
    static func seal(
        _ plaintext: UnsafeRawBufferPointer, associatedData: [UInt8], nonce: [UInt8], key: SecretBytes, into sealed: UnsafeMutableRawBufferPointer
    ) {
        precondition(key.count == keyByteCount && nonce.count == nonceByteCount && sealed.count == plaintext.count + tagByteCount)
        var written: UInt64 = 0
        let status = associatedData.withUnsafeBufferPointer { ad in
            nonce.withUnsafeBufferPointer { nonce in
                key.withKeyPointer { key in
                    crypto_aead_xchacha20poly1305_ietf_encrypt(
                        sealed.baseAddress!.assumingMemoryBound(to: UInt8.self), &written,
                        plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                        ad.baseAddress, UInt64(ad.count), nil, nonce.baseAddress!, key)
                }
            }
        }
        precondition(status == 0 && written == UInt64(sealed.count), "crypto_aead_xchacha20poly1305_ietf_encrypt failed")
    }

    /// The plaintext of `sealed` (ciphertext then tag), or nil when it does not authenticate under `key`,
    /// `nonce` and `associatedData`. `sealed` holds at least a tag (the caller's decoder checked).
    static func open(
        _ sealed: ArraySlice<UInt8>, associatedData: [UInt8], nonce: ArraySlice<UInt8>, key: SecretBytes
    ) -> [UInt8]? {
        var authentic = false
        let plaintext = [UInt8](unsafeUninitializedCapacity: sealed.count - tagByteCount) { buffer, initialized in
            authentic = open(sealed, associatedData: associatedData, nonce: nonce, key: key, into: UnsafeMutableRawBufferPointer(buffer))
            if !authentic { UnsafeMutableRawBufferPointer(buffer).initializeMemory(as: UInt8.self, repeating: 0) }
            initialized = authentic ? buffer.count : 0
        }
        return authentic ? plaintext : nil
    }

    /// A plaintext that is a secret (a wrapped key): opened straight into guarded memory, or nil when `sealed` does
    /// not authenticate.
    static func openSecret(
        _ sealed: ArraySlice<UInt8>, associatedData: [UInt8], nonce: ArraySlice<UInt8>, key: SecretBytes
    ) -> SecretBytes? {
        struct NotAuthentic: Error {}
        return try? SecretBytes(count: sealed.count - tagByteCount) { (buffer: UnsafeMutableRawBufferPointer) throws(NotAuthentic) in
            guard open(sealed, associatedData: associatedData, nonce: nonce, key: key, into: buffer) else { throw NotAuthentic() }
        }
    }

    /// Decrypts `sealed` into `plaintext` (exactly `sealed.count - tagByteCount` bytes); false, with nothing
    /// usable written, when it does not authenticate.
    private static func open(
        _ sealed: ArraySlice<UInt8>, associatedData: [UInt8], nonce: ArraySlice<UInt8>, key: SecretBytes,
        into plaintext: UnsafeMutableRawBufferPointer
    ) -> Bool {
        precondition(key.count == keyByteCount && nonce.count == nonceByteCount && sealed.count >= tagByteCount)
        precondition(plaintext.count == sealed.count - tagByteCount)
        var opened: UInt64 = 0
        // libsodium writes nothing when the tag does not verify; an empty plaintext still needs a valid pointer.
        var empty: UInt8 = 0
        let status = withUnsafeMutablePointer(to: &empty) { emptyPointer in
            sealed.withUnsafeBufferPointer { sealed in
                associatedData.withUnsafeBufferPointer { ad in
                    nonce.withUnsafeBufferPointer { nonce in
                        key.withKeyPointer { key in
                            crypto_aead_xchacha20poly1305_ietf_decrypt(
                                plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? emptyPointer, &opened, nil,
                                sealed.baseAddress!, UInt64(sealed.count), ad.baseAddress, UInt64(ad.count), nonce.baseAddress!, key)
                        }
                    }
                }
            }
        }
        return status == 0 && opened == UInt64(plaintext.count)
    }
}
