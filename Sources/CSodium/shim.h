// libsodium for Swift (Debian's libsodium-dev, found through pkg-config). NoteCrypto is its only user: everything
// else reaches libsodium through NoteCrypto's typed API.
#ifndef FLAKENOTES_CSODIUM_SHIM_H
#define FLAKENOTES_CSODIUM_SHIM_H
#include <sodium.h>
#endif
