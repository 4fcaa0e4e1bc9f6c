/* version.c — the engine's version, its error texts and its self-test. */
#include <string.h>

#include "coc/coc.h"
#include "crypto.h"
#include "wire.h"

#define COC_STR2(x) #x
#define COC_STR(x) COC_STR2(x)

const char *coc_version(void)
{
    return COC_STR(COC_VERSION_MAJOR) "." COC_STR(COC_VERSION_MINOR) "." COC_STR(COC_VERSION_PATCH);
}

static const char *const coc_error_text[] = {
    [COC_ERR_BASE - COC_EPROTO] = "protocol error: malformed frame from peer",
    [COC_ERR_BASE - COC_EAUTH] = "authentication failed: peer could not prove the endpoint id it claims",
    [COC_ERR_BASE - COC_ETRUNC] = "message truncated: receive buffer too small",
    [COC_ERR_BASE - COC_EPEERLOST] = "peer lost",
    [COC_ERR_BASE - COC_ENOROUTE] = "no route to destination",
    [COC_ERR_BASE - COC_ECLOSED] = "engine or connection closed",
    [COC_ERR_BASE - COC_ETIMEDOUT] = "operation timed out",
    [COC_ERR_BASE - COC_EINVAL] = "invalid argument",
    [COC_ERR_BASE - COC_ECANCELED] = "operation cancelled",
};

int coc_is_coc_error(int rc)
{
    return rc < COC_ERR_BASE && rc > COC_ERR_LAST;
}

const char *coc_strerror(int rc)
{
    if (rc >= 0)
        return "success";
    if (coc_is_coc_error(rc))
        return coc_error_text[COC_ERR_BASE - rc];
    if (rc > -4096)
        return strerror(-rc); /* glibc's table is static and read-only for known codes */
    return "unknown error";
}

/* Known answers: SHA-256("abc") (FIPS 180-4) and HMAC-SHA256 test case 2 (RFC 4231). */
static int crypto_ok(void)
{
    static const uint8_t abc[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                                    0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                                    0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    static const uint8_t jefe[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                     0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                     0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    static const char what[] = "what do ya want for nothing?";
    uint8_t out[32];
    const coc__bytes msg = {"abc", 3}, text = {what, sizeof what - 1};
    if (coc__sha256(&msg, 1, out) < 0 || memcmp(out, abc, 32) != 0)
        return 0;
    return coc__hmac_sha256("Jefe", 4, &text, 1, out) == 0 && memcmp(out, jefe, 32) == 0;
}

/* A header survives encoding and decoding; a broken one is refused. */
static int wire_ok(void)
{
    coc__hdr h = {.type = COC__DATA, .context = 7, .source = 1, .dest = 2, .tag = 9, .len = 10,
                  .seq = 3, .offset = 20, .total = 30, .rcookie = 5}, back;
    uint8_t b[COC__HDR_LEN], again[COC__HDR_LEN];
    coc__hdr_encode(&h, b);
    if (coc__hdr_decode(b, &back, NULL) != 0)
        return 0;
    coc__hdr_encode(&back, again); /* bytes, not structs: padding is indeterminate */
    if (memcmp(b, again, sizeof b) != 0 || back.total != 30 || back.rcookie != 5)
        return 0;
    b[0] ^= 0xff;
    return coc__hdr_decode(b, &back, NULL) == COC_EPROTO;
}

int coc_selftest(void)
{
    if (!crypto_ok() || !wire_ok())
        return COC_EPROTO;
    for (int rc = COC_ERR_BASE - 1; rc > COC_ERR_LAST; rc--) {
        const char *text = coc_strerror(rc);
        if (!coc_is_coc_error(rc) || text == NULL || text[0] == '\0')
            return rc;
    }
    if (coc_is_coc_error(-1) || coc_is_coc_error(0))
        return COC_EINVAL;
    return 0;
}
