/* record.c — the record layer (record.h): cutting, compressing, sealing and opening records. */
#include "record.h"

#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "coc/coc.h"
#include "crypto.h"

#define STORED_MAX (COC__REC_MAX + COC__AEAD_TAG)
#define WIRE_MAX (COC__REC_HDR + STORED_MAX)
#define RX_CAP (2 * WIRE_MAX)      /* a whole record and most of the next */
#define SHRINK_MIN 32              /* compressed must save 1/32 (3 %) or the record goes raw */
#define COMPRESS_FROM 256          /* shorter records go raw without trying */
#define BACKOFF_MAX 64             /* records sent raw untried after incompressible ones, at most */
#define ZSTD_LEVEL 1

struct coc__rec {
    int codec;
    coc__aead *seal, *open;        /* NULL on a compress-only link */
    /* send side */
    uint8_t *out;                  /* the record being written: WIRE_MAX bytes */
    size_t out_len, out_off;
    uint8_t *stage;                /* plaintext gathered for the compressor */
    uint8_t *packed;               /* its compressed form */
    ZSTD_CCtx *zc;
    unsigned skip, backoff;        /* records left to send untried / next skip */
    /* receive side */
    uint8_t *in;                   /* stream bytes read: RX_CAP; unopened from in_off to in_len */
    size_t in_off, in_len;
    uint8_t *plain;                /* an opened record's plaintext not yet taken */
    size_t plain_off, plain_len;
    uint8_t *unsealed;             /* an opened record's compressed bytes */
    ZSTD_DCtx *zd;
};

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The two directions' keys: HKDF(pair key, salt = both nonces, info = label | direction |
 * connector's hello flags). */
static int derive(coc__rec *r, const uint8_t *pair_key, size_t key_len, const uint8_t *conn_nonce,
                  const uint8_t *acc_nonce, size_t nonce_len, uint16_t conn_flags, int outgoing)
{
    static const char label[] = "coc-record-1";
    enum { L = sizeof label - 1 };
    uint8_t salt[128], info[L + 3], keys[2][COC__AEAD_KEY];
    if (2 * nonce_len > sizeof salt)
        return COC_EINVAL;
    memcpy(salt, conn_nonce, nonce_len);
    memcpy(salt + nonce_len, acc_nonce, nonce_len);
    memcpy(info, label, L);
    info[L + 1] = (uint8_t)conn_flags;
    info[L + 2] = (uint8_t)(conn_flags >> 8);
    for (int dir = 0; dir < 2; dir++) { /* 0: connector to acceptor, 1: back */
        info[L] = (uint8_t)dir;
        if (coc__hkdf(pair_key, key_len, salt, 2 * nonce_len, info, sizeof info, keys[dir],
                      COC__AEAD_KEY) < 0)
            return COC_EPROTO;
    }
    r->seal = coc__aead_new(keys[outgoing ? 0 : 1], 1);
    r->open = coc__aead_new(keys[outgoing ? 1 : 0], 0);
    memset(keys, 0, sizeof keys);
    return r->seal && r->open ? 0 : COC_EPROTO;
}

coc__rec *coc__rec_new(const uint8_t *pair_key, size_t key_len, const uint8_t *conn_nonce,
                       const uint8_t *acc_nonce, size_t nonce_len, uint16_t conn_flags,
                       int outgoing, int seal, int codec)
{
    coc__rec *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->codec = codec;
    r->backoff = 1;
    r->out = malloc(WIRE_MAX);
    r->in = malloc(RX_CAP);
    r->plain = malloc(COC__REC_MAX);
    r->unsealed = malloc(STORED_MAX);
    r->zd = ZSTD_createDCtx();
    int ok = r->out && r->in && r->plain && r->unsealed && r->zd;
    if (ok && codec != COC__CODEC_NONE) {
        r->stage = malloc(COC__REC_MAX);
        r->packed = malloc(COC__REC_MAX);
        ok = r->stage && r->packed;
        if (ok && codec == COC__CODEC_ZSTD)
            ok = (r->zc = ZSTD_createCCtx()) != NULL;
    }
    if (ok && seal)
        ok = derive(r, pair_key, key_len, conn_nonce, acc_nonce, nonce_len, conn_flags,
                    outgoing) == 0;
    if (!ok) {
        coc__rec_free(r);
        return NULL;
    }
    return r;
}

void coc__rec_free(coc__rec *r)
{
    if (!r)
        return;
    coc__aead_free(r->seal);
    coc__aead_free(r->open);
    ZSTD_freeCCtx(r->zc);
    ZSTD_freeDCtx(r->zd);
    free(r->out);
    free(r->stage);
    free(r->packed);
    free(r->in);
    free(r->plain);
    free(r->unsealed);
    free(r);
}

/* ---- sending ---- */

size_t coc__rec_tx_pending(const coc__rec *r, const uint8_t **data)
{
    if (!r)
        return 0;
    if (data)
        *data = r->out + r->out_off;
    return r->out_len - r->out_off;
}

void coc__rec_tx_done(coc__rec *r, size_t n)
{
    r->out_off += n;
    if (r->out_off == r->out_len)
        r->out_off = r->out_len = 0;
}

/* Compress the n staged bytes; the compressed size, or 0 when it does not shrink enough. */
static size_t pack(coc__rec *r, size_t n)
{
    size_t cap = n - n / SHRINK_MIN - 1;
    if (r->codec == COC__CODEC_ZSTD) {
        size_t got = ZSTD_compressCCtx(r->zc, r->packed, cap, r->stage, n, ZSTD_LEVEL);
        return ZSTD_isError(got) ? 0 : got;
    }
    int got = LZ4_compress_default((const char *)r->stage, (char *)r->packed, (int)n, (int)cap);
    return got > 0 ? (size_t)got : 0;
}

ssize_t coc__rec_tx_seal(coc__rec *r, const struct iovec *iov, int cnt, size_t *wire, int *raw)
{
    coc__bytes parts[16];
    size_t n = 0, np = 0;
    for (int i = 0; i < cnt && n < COC__REC_MAX && np < 16; i++) {
        size_t take = iov[i].iov_len < COC__REC_MAX - n ? iov[i].iov_len : COC__REC_MAX - n;
        if (take)
            parts[np++] = (coc__bytes){iov[i].iov_base, take};
        n += take;
    }
    uint8_t codec = COC__CODEC_NONE;
    *raw = 0;
    if (r->codec != COC__CODEC_NONE && n >= COMPRESS_FROM) {
        if (r->skip) {
            r->skip--;
        } else {
            size_t at = 0;
            for (size_t i = 0; i < np; i++) {
                memcpy(r->stage + at, parts[i].p, parts[i].n);
                at += parts[i].n;
            }
            size_t packed = pack(r, n);
            if (packed) {
                codec = (uint8_t)r->codec;
                parts[0] = (coc__bytes){r->packed, packed};
                np = 1;
                r->backoff = 1;
            } else {
                *raw = 1;
                r->skip = r->backoff; /* incompressible: do not try again for a while */
                r->backoff = r->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : r->backoff * 2;
            }
        }
    }
    size_t stored = 0;
    for (size_t i = 0; i < np; i++)
        stored += parts[i].n;
    if (r->seal)
        stored += COC__AEAD_TAG;
    uint8_t *h = r->out;
    put32(h, (uint32_t)stored);
    h[4] = codec;
    h[5] = (uint8_t)n;
    h[6] = (uint8_t)(n >> 8);
    h[7] = (uint8_t)(n >> 16);
    if (r->seal) {
        if (coc__aead_seal(r->seal, h, COC__REC_HDR, parts, np, h + COC__REC_HDR) < 0)
            return COC_EPROTO;
    } else {
        size_t at = COC__REC_HDR;
        for (size_t i = 0; i < np; i++) {
            memcpy(h + at, parts[i].p, parts[i].n);
            at += parts[i].n;
        }
    }
    r->out_off = 0;
    r->out_len = COC__REC_HDR + stored;
    *wire = r->out_len;
    return (ssize_t)n;
}

/* ---- receiving ---- */

uint8_t *coc__rec_rx_space(coc__rec *r, size_t *room)
{
    if (r->in_off && RX_CAP - r->in_len < WIRE_MAX) { /* move the rest down only when needed */
        memmove(r->in, r->in + r->in_off, r->in_len - r->in_off);
        r->in_len -= r->in_off;
        r->in_off = 0;
    }
    *room = RX_CAP - r->in_len;
    return r->in + r->in_len;
}

void coc__rec_rx_fed(coc__rec *r, size_t n)
{
    r->in_len += n;
}

/* The bytes of the whole record at the front of `in`, or 0 while it is incomplete. */
static size_t whole_record(const coc__rec *r)
{
    if (r->in_len - r->in_off < COC__REC_HDR)
        return 0;
    size_t len = COC__REC_HDR + (size_t)get32(r->in + r->in_off);
    return len <= r->in_len - r->in_off ? len : 0;
}

/* A header at the front claims more than any record holds: an error to report. */
static int overlong(const coc__rec *r)
{
    return r->in_len - r->in_off >= COC__REC_HDR && get32(r->in + r->in_off) > STORED_MAX;
}

int coc__rec_rx_ready(const coc__rec *r)
{
    return r->plain_off < r->plain_len || whole_record(r) != 0 || overlong(r);
}

/* Open the record at the front of `in` into out (room for COC__REC_MAX bytes). */
static int open_record(coc__rec *r, uint8_t *out, size_t *n, const char **why)
{
    const uint8_t *h = r->in + r->in_off;
    size_t stored = get32(h), tag = r->open ? COC__AEAD_TAG : 0;
    uint8_t codec = h[4];
    size_t plain = (size_t)h[5] | (size_t)h[6] << 8 | (size_t)h[7] << 16;
    if (stored > STORED_MAX || plain == 0 || plain > COC__REC_MAX || stored < tag ||
        codec > COC__CODEC_LZ4 || (codec == COC__CODEC_NONE && stored - tag != plain)) {
        *why = "malformed record header";
        return COC_EPROTO;
    }
    const uint8_t *body = h + COC__REC_HDR;
    if (r->open) {
        uint8_t *to = codec == COC__CODEC_NONE ? out : r->unsealed;
        if (coc__aead_open(r->open, h, COC__REC_HDR, body, stored, to) < 0) {
            *why = "a record failed authentication (altered, replayed or out of order)";
            return COC_EPROTO;
        }
        body = to;
    } else if (codec == COC__CODEC_NONE) {
        memcpy(out, body, plain);
    }
    size_t clen = stored - tag;
    if (codec == COC__CODEC_ZSTD) {
        size_t got = ZSTD_decompressDCtx(r->zd, out, plain, body, clen);
        if (ZSTD_isError(got) || got != plain) {
            *why = "a zstd record does not decompress to its stated length";
            return COC_EPROTO;
        }
    } else if (codec == COC__CODEC_LZ4) {
        int got = LZ4_decompress_safe((const char *)body, (char *)out, (int)clen, (int)plain);
        if (got < 0 || (size_t)got != plain) {
            *why = "an lz4 record does not decompress to its stated length";
            return COC_EPROTO;
        }
    }
    *n = plain;
    return 0;
}

ssize_t coc__rec_rx_take(coc__rec *r, uint8_t *dst, size_t want, const char **why,
                         size_t *wire, size_t *plain)
{
    size_t done = 0;
    *wire = *plain = 0;
    while (done < want) {
        if (r->plain_off < r->plain_len) {
            size_t n = r->plain_len - r->plain_off;
            if (n > want - done)
                n = want - done;
            memcpy(dst + done, r->plain + r->plain_off, n);
            r->plain_off += n;
            done += n;
            continue;
        }
        size_t len = whole_record(r);
        if (!len) {
            if (overlong(r)) {
                *why = "malformed record header (too long)";
                return COC_EPROTO;
            }
            break;
        }
        const uint8_t *h = r->in + r->in_off;
        size_t stated = (size_t)h[5] | (size_t)h[6] << 8 | (size_t)h[7] << 16;
        int direct = want - done >= stated && stated <= COC__REC_MAX;
        size_t n = 0;
        if (open_record(r, direct ? dst + done : r->plain, &n, why) < 0)
            return COC_EPROTO;
        if (direct) {
            done += n;
        } else {
            r->plain_off = 0;
            r->plain_len = n;
        }
        *wire += len;
        *plain += n;
        r->in_off += len;
        if (r->in_off == r->in_len)
            r->in_off = r->in_len = 0;
    }
    return (ssize_t)done;
}
