#!/usr/bin/env python3
"""Known answers for NoteCryptoTests, computed by implementations independent of libsodium.

Argon2id from argon2-cffi (the reference C implementation), BLAKE2b from hashlib, XChaCha20-Poly1305 from
pycryptodome, X25519 from pycryptodome. Each block follows the layout Docs/SECURITY.md documents, so a test that
matches these values checks NoteCrypto's layouts as well as its use of libsodium.

    python3 -m venv .build/kat-venv && .build/kat-venv/bin/pip install pycryptodome argon2-cffi
    .build/kat-venv/bin/python Tests/NoteCryptoTests/known_answers.py
"""
import base64
import hashlib
import struct
import unicodedata

from argon2.low_level import Type, hash_secret_raw
from Crypto.Cipher import ChaCha20_Poly1305


def kdf(master: bytes, subkey_id: int, context: str, length: int = 32) -> bytes:
    """libsodium's crypto_kdf_derive_from_key: BLAKE2b keyed by the master, salt = LE64(id) ‖ 0⁸, personal = ctx ‖ 0⁸."""
    return hashlib.blake2b(b"", digest_size=length, key=master, salt=struct.pack("<Q", subkey_id) + bytes(8),
                           person=context.encode() + bytes(8)).digest()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def xchacha(key: bytes, nonce: bytes, ad: bytes, plaintext: bytes) -> bytes:
    cipher = ChaCha20_Poly1305.new(key=key, nonce=nonce)
    cipher.update(ad)
    ciphertext, tag = cipher.encrypt_and_digest(plaintext)
    return ciphertext + tag


def be64(value: int) -> bytes:
    return struct.pack(">Q", value)


# 1. Password → Argon2id → authKey, wrapKey.
salt = bytes(range(16))
for name, ops, mem in [("insecureForTesting", 1, 8 << 10), ("production", 3, 64 << 20)]:
    password = unicodedata.normalize("NFC", "correct horse battery staple").encode()
    master = hash_secret_raw(password, salt, time_cost=ops, memory_cost=mem >> 10, parallelism=1, hash_len=32,
                             type=Type.ID, version=19)
    print(f"kdf {name}: authKey {kdf(master, 1, 'FN-auth1').hex()}")
    print(f"kdf {name}: wrapKey {kdf(master, 1, 'FN-wrap1').hex()}")

# 2. A note envelope: account key generation 7, bytes 0x80..0x9f; account 1001, client 2002, origin 3003, edit 4004.
key = bytes(range(0x80, 0xA0))
nonce = bytes(range(0x40, 0x58))
header = bytes([1]) + struct.pack(">I", 7)
ad = b"flakenotes.note" + header + be64(1001) + be64(2002) + be64(3003) + be64(4004)
envelope = header + nonce + xchacha(key, nonce, ad, b"Hello, FlakeNotes.")
print(f"envelope: {b64url(envelope)}")

# 3. A wrapped account key: generation 2 (bytes 0x20..0x3f) wrapped by generation 1 (bytes 0x80..0x9f), account 1001.
inner = bytes(range(0x20, 0x40))
header = bytes([1, 3]) + struct.pack(">I", 2) + struct.pack(">I", 1)
ad = b"flakenotes.account-key" + header + be64(1001)
wrapped = header + nonce + xchacha(key, nonce, ad, inner)
print(f"wrapped by account key: {b64url(wrapped)}")

# 4. A recovery key of bytes 0x00..0x1f: its human form, and the same account key wrapped by it.
recovery = bytes(range(32))
alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
bits = int.from_bytes(recovery, "big") << 4  # 256 bits then 4 zero bits: 52 characters
data = "".join(alphabet[(bits >> (5 * i)) & 31] for i in reversed(range(52)))
check = int.from_bytes(kdf(recovery, 1, "FN-recck", 16)[:3], "big") >> 4  # the first 20 bits
data += "".join(alphabet[(check >> (5 * i)) & 31] for i in reversed(range(4)))
print(f"recovery human form: {'-'.join(data[i:i + 4] for i in range(0, 56, 4))}")
header = bytes([1, 2]) + struct.pack(">I", 2) + struct.pack(">I", 0)
ad = b"flakenotes.account-key" + header + be64(1001)
wrapped = header + nonce + xchacha(kdf(recovery, 1, "FN-recov"), nonce, ad, inner)
print(f"wrapped by recovery key: {b64url(wrapped)}")
try:
    from Crypto.PublicKey import ECC
    seed = kdf(recovery, 2, "FN-recov")
    secret = hashlib.sha512(seed).digest()[:32]  # crypto_box_seed_keypair
    point = ECC.construct(curve="Curve25519", seed=secret)
    print(f"recovery public key: {b64url(point.public_key().export_key(format='raw'))}")
except Exception as error:  # pycryptodome without X25519
    print(f"recovery public key: (not computed: {error})")

# 5. An attachment (issue 33): the file key of the file b"Hello, attachment." (its SHA-256), chunks of 1 MiB, under
#    account key generation 7 (bytes 0x80..0x9f) of account 1001; then chunk 3 sealed under it (plaintext b"chunk").
key = bytes(range(0x80, 0xA0))
file_sha256 = hashlib.sha256(b"Hello, attachment.").digest()
root = kdf(key, 1, "FN-attch")
file_key = hashlib.blake2b(b"flakenotes.attachment" + be64(1001) + struct.pack(">I", 7) + struct.pack(">I", 1 << 20)
                           + file_sha256, digest_size=32, key=root).digest()
print(f"attachment key: {file_key.hex()}")
nonce = hashlib.blake2b(b"flakenotes.chunk-nonce" + be64(3), digest_size=24, key=file_key).digest()
stored = bytes([1]) + xchacha(file_key, nonce, b"flakenotes.chunk" + bytes([1]) + be64(3), b"chunk")
print(f"attachment chunk 3: {stored.hex()}")
print(f"attachment chunk 3 address: {hashlib.sha256(stored).hexdigest()}")
