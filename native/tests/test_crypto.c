/* test_crypto.c — coc's use of libcrypto: SHA-256 against FIPS 180-4 examples, HMAC-SHA256
 * against RFC 4231, HKDF against RFC 5869; AES-256-GCM and the record layer (record.h):
 * round trips, and altered, replayed and malformed records refused. */
#include <string.h>

#include "check.h"
#include "coc/coc.h"
#include "crypto.h"
#include "record.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void unhex(const char *s, uint8_t *out, size_t *n)
{
    *n = strlen(s) / 2;
    for (size_t i = 0; i < *n; i++)
        sscanf(s + 2 * i, "%2hhx", &out[i]);
}

static void sha(const void *data, size_t len, const char *want)
{
    coc__bytes parts[32];
    size_t np = 0;
    uint8_t d[32];
    char h[65];
    /* in uneven pieces, as the handshake hands them over */
    const uint8_t *p = data;
    for (size_t step = 1; len && np < 31; step = step * 3 + 1) {
        size_t n = step < len ? step : len;
        parts[np++] = (coc__bytes){p, n};
        p += n;
        len -= n;
    }
    if (len)
        parts[np++] = (coc__bytes){p, len};
    CHECK(coc__sha256(parts, np, d) == 0);
    hex(d, 32, h);
    if (strcmp(h, want) != 0)
        fprintf(stderr, "sha256 got %s want %s\n", h, want);
    CHECK(strcmp(h, want) == 0);
}

static void hmac(const char *key_hex, const char *data_hex, const char *want, size_t trunc)
{
    uint8_t key[200], data[200], d[32];
    size_t kn, dn;
    char h[65];
    unhex(key_hex, key, &kn);
    unhex(data_hex, data, &dn);
    const coc__bytes msg = {data, dn};
    CHECK(coc__hmac_sha256(key, kn, &msg, 1, d) == 0);
    hex(d, trunc, h);
    if (strcmp(h, want) != 0)
        fprintf(stderr, "hmac got %s want %s\n", h, want);
    CHECK(strcmp(h, want) == 0);
}

static void hkdf(void)
{
    uint8_t ikm[22], salt[13], info[10], okm[42], want[42];
    size_t n;
    memset(ikm, 0x0b, sizeof ikm);
    for (int i = 0; i < 13; i++)
        salt[i] = (uint8_t)i;
    for (int i = 0; i < 10; i++)
        info[i] = (uint8_t)(0xf0 + i);
    unhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
          want, &n);
    CHECK(coc__hkdf(ikm, sizeof ikm, salt, sizeof salt, info, sizeof info, okm, sizeof okm) == 0);
    CHECK(memcmp(okm, want, sizeof okm) == 0); /* RFC 5869 test case 1 */
}

static void aead(void)
{
    uint8_t key[COC__AEAD_KEY] = {7}, aad[8] = {1, 2}, ct[64 + COC__AEAD_TAG], pt[64];
    const char msg[] = "a record of the stream";
    const coc__bytes parts[] = {{msg, 10}, {msg + 10, sizeof msg - 10}};
    coc__aead *s = coc__aead_new(key, 1), *o = coc__aead_new(key, 0);
    CHECK(s && o);
    int n = coc__aead_seal(s, aad, sizeof aad, parts, 2, ct);
    CHECK(n == (int)(sizeof msg + COC__AEAD_TAG));
    CHECK(memmem(ct, (size_t)n, "record", 6) == NULL);
    CHECK(coc__aead_open(o, aad, sizeof aad, ct, (size_t)n, pt) == (int)sizeof msg);
    CHECK(memcmp(pt, msg, sizeof msg) == 0);
    /* the same record again (a replay) meets the next counter: refused */
    CHECK(coc__aead_open(o, aad, sizeof aad, ct, (size_t)n, pt) == COC_EPROTO);
    /* a changed byte, under the right counter: refused */
    coc__aead *o2 = coc__aead_new(key, 0);
    ct[3] ^= 1;
    CHECK(coc__aead_open(o2, aad, sizeof aad, ct, (size_t)n, pt) == COC_EPROTO);
    coc__aead_free(s);
    coc__aead_free(o);
    coc__aead_free(o2);
}

/* Records from a connector's layer through an acceptor's: bytes, counters, and refusals. */
static void records(int seal, int codec)
{
    uint8_t key[32] = {9}, nc[32] = {1}, na[32] = {2};
    uint16_t flags = seal ? 0x4 : 0;
    coc__rec *tx = coc__rec_new(key, 32, nc, na, 32, flags, 1, seal, codec);
    coc__rec *rx = coc__rec_new(key, 32, nc, na, 32, flags, 0, seal, COC__CODEC_NONE);
    CHECK(tx && rx);
    static uint8_t src[200000], dst[200000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i < 100000 ? i % 13 : (i * 2654435761u) >> 13); /* text-like, then noise */
    size_t sent = 0, got = 0, wire_total = 0;
    while (got < sizeof src) {
        if (sent < sizeof src) {
            struct iovec iov = {src + sent, sizeof src - sent < 30000 ? sizeof src - sent : 30000};
            size_t wire;
            int raw;
            ssize_t n = coc__rec_tx_seal(tx, &iov, 1, &wire, &raw);
            CHECK(n > 0);
            sent += (size_t)n;
            wire_total += wire;
            const uint8_t *data;
            size_t pending = coc__rec_tx_pending(tx, &data), room;
            uint8_t *space = coc__rec_rx_space(rx, &room);
            CHECK(pending <= room);
            memcpy(space, data, pending);
            coc__rec_rx_fed(rx, pending);
            coc__rec_tx_done(tx, pending);
        }
        const char *why = NULL;
        size_t w, p;
        ssize_t n;
        while ((n = coc__rec_rx_take(rx, dst + got, 7000, &why, &w, &p)) > 0) /* in pieces */
            got += (size_t)n;
        CHECK(n == 0);
        if (n < 0)
            break;
    }
    CHECK(memcmp(src, dst, sizeof src) == 0);
    if (codec != COC__CODEC_NONE)
        CHECK(wire_total < sizeof src * 3 / 4); /* the first half shrinks */
    /* a record with a changed byte */
    struct iovec iov = {src, 1000};
    size_t wire;
    int raw;
    CHECK(coc__rec_tx_seal(tx, &iov, 1, &wire, &raw) == 1000);
    const uint8_t *data;
    size_t pending = coc__rec_tx_pending(tx, &data), room;
    uint8_t *space = coc__rec_rx_space(rx, &room);
    memcpy(space, data, pending);
    space[pending - 1] ^= 0x40;
    coc__rec_rx_fed(rx, pending);
    const char *why = NULL;
    size_t w, p;
    ssize_t n = coc__rec_rx_take(rx, dst, sizeof dst, &why, &w, &p);
    /* sealed: refused; not sealed: a raw record's last byte is data, and arrives changed */
    CHECK(seal ? n == COC_EPROTO && why != NULL : n == 1000);
    coc__rec_free(tx);
    coc__rec_free(rx);
    /* a header claiming a record longer than any */
    rx = coc__rec_new(key, 32, nc, na, 32, flags, 0, seal, COC__CODEC_NONE);
    space = coc__rec_rx_space(rx, &room);
    memset(space, 0xff, 8);
    coc__rec_rx_fed(rx, 8);
    CHECK(coc__rec_rx_ready(rx));
    CHECK(coc__rec_rx_take(rx, dst, 10, &why, &w, &p) == COC_EPROTO);
    coc__rec_free(rx);
}

int main(void)
{
    hkdf();
    aead();
    records(1, COC__CODEC_NONE);
    records(1, COC__CODEC_ZSTD);
    records(0, COC__CODEC_LZ4);
    records(1, COC__CODEC_LZ4);
    /* FIPS 180-4 / NIST CSRC examples */
    sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha(m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    static char million[1000000];
    memset(million, 'a', sizeof million);
    sha(million, sizeof million, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

    /* RFC 4231 test cases 1, 2, 3, 4, 5 (truncated to 128 bits), 6, 7 */
    hmac("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32);
    hmac("4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32);
    hmac("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 32);
    hmac("0102030405060708090a0b0c0d0e0f10111213141516171819",
         "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b", 32);
    hmac("0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c", "546573742057697468205472756e636174696f6e",
         "a3b6167473100ee06e0c796c2955552b", 16);
    char key131[263];
    for (int i = 0; i < 131; i++)
        memcpy(key131 + 2 * i, "aa", 2);
    key131[262] = '\0';
    hmac(key131,
         "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32);
    hmac(key131,
         "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", 32);

    uint8_t a[32] = {1}, b[32] = {1};
    CHECK(coc__ct_equal(a, b, 32));
    b[31] = 1;
    CHECK(!coc__ct_equal(a, b, 32));
    CHECK_DONE();
}
