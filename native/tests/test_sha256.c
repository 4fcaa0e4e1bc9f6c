/* test_sha256.c — SHA-256 against FIPS 180-4 examples, HMAC-SHA256 against RFC 4231. */
#include <string.h>

#include "check.h"
#include "coc/coc.h"
#include "sha256.h"

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
    coc__sha256 s;
    uint8_t d[32];
    char h[65];
    coc__sha256_init(&s);
    /* feed in uneven pieces to exercise the block buffer */
    const uint8_t *p = data;
    for (size_t step = 1; len; step = step * 3 + 1) {
        size_t n = step < len ? step : len;
        coc__sha256_update(&s, p, n);
        p += n;
        len -= n;
    }
    coc__sha256_final(&s, d);
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
    coc__hmac m;
    coc__hmac_init(&m, key, kn);
    coc__hmac_update(&m, data, dn);
    coc__hmac_final(&m, d);
    hex(d, trunc, h);
    if (strcmp(h, want) != 0)
        fprintf(stderr, "hmac got %s want %s\n", h, want);
    CHECK(strcmp(h, want) == 0);
}

int main(void)
{
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
