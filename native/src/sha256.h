/* sha256.h — SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), so the handshake needs no OpenSSL. */
#ifndef COC_SHA256_H
#define COC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define COC__SHA256_LEN 32

typedef struct coc__sha256 {
    uint32_t h[8];
    uint64_t bytes;   /* message length so far */
    uint8_t block[64];
    size_t fill;      /* bytes waiting in block */
} coc__sha256;

void coc__sha256_init(coc__sha256 *s);
void coc__sha256_update(coc__sha256 *s, const void *data, size_t len);
void coc__sha256_final(coc__sha256 *s, uint8_t out[COC__SHA256_LEN]);

typedef struct coc__hmac {
    coc__sha256 inner, outer;
} coc__hmac;

void coc__hmac_init(coc__hmac *m, const void *key, size_t key_len);
void coc__hmac_update(coc__hmac *m, const void *data, size_t len);
void coc__hmac_final(coc__hmac *m, uint8_t out[COC__SHA256_LEN]);

/* 1 when the n bytes of a and b are equal; time depends on n only, never on the contents. */
int coc__ct_equal(const uint8_t *a, const uint8_t *b, size_t n);

#endif
