/*
 * crypto.h — the few primitives coc needs, all from OpenSSL's libcrypto (a vetted library,
 * not coc's own code): SHA-256 and HMAC-SHA-256 for the handshake's keys and proofs, HKDF
 * for the record layer's keys, AES-256-GCM for its records, and a constant-time compare.
 * docs/wire-protocol.md says why this library and how each is used.
 */
#ifndef COC_CRYPTO_H
#define COC_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define COC__SHA256_LEN 32
#define COC__AEAD_KEY 32  /* AES-256-GCM key */
#define COC__AEAD_TAG 16  /* its tag, after each record's ciphertext */

/* One piece of a message to hash or authenticate: the pieces are taken in order. */
typedef struct coc__bytes {
    const void *p;
    size_t n;
} coc__bytes;

/* SHA-256 of the n pieces. 0, or COC_EPROTO if libcrypto fails. */
int coc__sha256(const coc__bytes *parts, size_t n, uint8_t out[COC__SHA256_LEN]);

/* HMAC-SHA-256 under key of the n pieces. 0, or COC_EPROTO if libcrypto fails. */
int coc__hmac_sha256(const void *key, size_t key_len, const coc__bytes *parts, size_t n,
                     uint8_t out[COC__SHA256_LEN]);

/* HKDF-SHA-256 (RFC 5869): out_len bytes from ikm, salt and info. 0 or COC_EPROTO. */
int coc__hkdf(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len,
              const uint8_t *info, size_t info_len, uint8_t *out, size_t out_len);

/* 1 when the n bytes of a and b are equal; time depends on n only, never on the contents. */
int coc__ct_equal(const uint8_t *a, const uint8_t *b, size_t n);

/* One direction of AES-256-GCM with a fixed key and a 64-bit record counter as nonce. */
typedef struct coc__aead coc__aead;

/* A context for sealing (seal = 1) or opening records under key; NULL on failure. */
coc__aead *coc__aead_new(const uint8_t key[COC__AEAD_KEY], int seal);
void coc__aead_free(coc__aead *a);

/*
 * Seal: encrypt the pieces (their bytes in order, n total) into out and append the tag;
 * the nonce is the counter, which then advances. aad (alen bytes) is authenticated too.
 * Returns the bytes written (total + COC__AEAD_TAG) or COC_EPROTO.
 */
int coc__aead_seal(coc__aead *a, const uint8_t *aad, size_t alen, const coc__bytes *parts,
                   size_t n, uint8_t *out);

/*
 * Open: check and decrypt len bytes (ciphertext then tag) into out (len - COC__AEAD_TAG
 * bytes) with the next counter as nonce. COC_EPROTO when the tag does not check out: the
 * record was altered, replayed, reordered or made under another key.
 */
int coc__aead_open(coc__aead *a, const uint8_t *aad, size_t alen, const uint8_t *in, size_t len,
                   uint8_t *out);

#endif
