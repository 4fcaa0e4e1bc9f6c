/* crypto.c — coc's primitives on OpenSSL's libcrypto (crypto.h says which and why). */
#include "crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "coc/coc.h"

int coc__sha256(const coc__bytes *parts, size_t n, uint8_t out[COC__SHA256_LEN])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_DigestUpdate(ctx, parts[i].p, parts[i].n);
    ok = ok && EVP_DigestFinal_ex(ctx, out, NULL);
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : COC_EPROTO;
}

/* The HMAC implementation, fetched once: a fetch costs more than the MAC of a handshake's
 * few dozen bytes (measured 8.8 us per HMAC with a fetch each time). Fetched objects are
 * immutable and may be shared between threads. */
static EVP_MAC *hmac_impl;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void fetch_hmac(void)
{
    hmac_impl = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

int coc__hmac_sha256(const void *key, size_t key_len, const coc__bytes *parts, size_t n,
                     uint8_t out[COC__SHA256_LEN])
{
    pthread_once(&hmac_once, fetch_hmac);
    EVP_MAC_CTX *ctx = hmac_impl ? EVP_MAC_CTX_new(hmac_impl) : NULL;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", "SHA256", 0),
                           OSSL_PARAM_construct_end()};
    size_t len = 0;
    int ok = ctx && EVP_MAC_init(ctx, key, key_len, params);
    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_MAC_update(ctx, parts[i].p, parts[i].n);
    ok = ok && EVP_MAC_final(ctx, out, &len, COC__SHA256_LEN) && len == COC__SHA256_LEN;
    EVP_MAC_CTX_free(ctx);
    return ok ? 0 : COC_EPROTO;
}

int coc__hkdf(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len,
              const uint8_t *info, size_t info_len, uint8_t *out, size_t out_len)
{
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string("digest", "SHA256", 0),
        OSSL_PARAM_construct_octet_string("key", (void *)ikm, ikm_len),
        OSSL_PARAM_construct_octet_string("salt", (void *)salt, salt_len),
        OSSL_PARAM_construct_octet_string("info", (void *)info, info_len),
        OSSL_PARAM_construct_end()};
    int ok = ctx && EVP_KDF_derive(ctx, out, out_len, params) > 0;
    EVP_KDF_CTX_free(ctx);
    EVP_KDF_free(kdf);
    return ok ? 0 : COC_EPROTO;
}

int coc__ct_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

struct coc__aead {
    EVP_CIPHER_CTX *ctx;
    int seal;
    uint64_t counter;
};

coc__aead *coc__aead_new(const uint8_t key[COC__AEAD_KEY], int seal)
{
    coc__aead *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->seal = seal;
    a->ctx = EVP_CIPHER_CTX_new();
    int ok = a->ctx && (seal ? EVP_EncryptInit_ex(a->ctx, EVP_aes_256_gcm(), NULL, key, NULL)
                             : EVP_DecryptInit_ex(a->ctx, EVP_aes_256_gcm(), NULL, key, NULL));
    if (!ok) {
        coc__aead_free(a);
        return NULL;
    }
    return a;
}

void coc__aead_free(coc__aead *a)
{
    if (!a)
        return;
    EVP_CIPHER_CTX_free(a->ctx);
    free(a);
}

/* The 96-bit nonce of the next record: 4 zero bytes, then the counter (little-endian). */
static int next_nonce(coc__aead *a)
{
    uint8_t iv[12] = {0};
    for (int i = 0; i < 8; i++)
        iv[4 + i] = (uint8_t)(a->counter >> (8 * i));
    a->counter++;
    return a->seal ? EVP_EncryptInit_ex(a->ctx, NULL, NULL, NULL, iv)
                   : EVP_DecryptInit_ex(a->ctx, NULL, NULL, NULL, iv);
}

int coc__aead_seal(coc__aead *a, const uint8_t *aad, size_t alen, const coc__bytes *parts,
                   size_t n, uint8_t *out)
{
    int len = 0, done = 0;
    int ok = next_nonce(a) && EVP_EncryptUpdate(a->ctx, NULL, &len, aad, (int)alen);
    for (size_t i = 0; ok && i < n; i++) {
        ok = EVP_EncryptUpdate(a->ctx, out + done, &len, parts[i].p, (int)parts[i].n);
        done += len;
    }
    ok = ok && EVP_EncryptFinal_ex(a->ctx, out + done, &len);
    done += len;
    ok = ok && EVP_CIPHER_CTX_ctrl(a->ctx, EVP_CTRL_GCM_GET_TAG, COC__AEAD_TAG, out + done);
    return ok ? done + COC__AEAD_TAG : COC_EPROTO;
}

int coc__aead_open(coc__aead *a, const uint8_t *aad, size_t alen, const uint8_t *in, size_t len,
                   uint8_t *out)
{
    if (len < COC__AEAD_TAG)
        return COC_EPROTO;
    int n = 0, fin = 0;
    size_t clen = len - COC__AEAD_TAG;
    int ok = next_nonce(a) && EVP_DecryptUpdate(a->ctx, NULL, &n, aad, (int)alen) &&
             EVP_DecryptUpdate(a->ctx, out, &n, in, (int)clen) &&
             EVP_CIPHER_CTX_ctrl(a->ctx, EVP_CTRL_GCM_SET_TAG, COC__AEAD_TAG,
                                 (void *)(in + clen)) &&
             EVP_DecryptFinal_ex(a->ctx, out + n, &fin) > 0;
    return ok ? n + fin : COC_EPROTO;
}
