/* test_wire.c — frame header and handshake codecs: round trips, and every rule the
 * decoder enforces rejects what breaks it. */
#include <string.h>

#include "check.h"
#include "coc/coc.h"
#include "wire.h"

static coc__hdr eager(void)
{
    return (coc__hdr){.type = COC__EAGER, .context = 3, .source = 1, .dest = 2, .tag = 9, .len = 100,
                      .seq = 77, .total = 100};
}

static int decodes(const coc__hdr *h)
{
    uint8_t b[COC__HDR_LEN];
    coc__hdr back;
    coc__hdr_encode(h, b);
    return coc__hdr_decode(b, &back, NULL) == 0;
}

int main(void)
{
    uint8_t b[COC__HDR_LEN];
    coc__hdr h = {.type = COC__DATA, .context = 0xdeadbeef, .source = 7, .dest = 0xfffffffe, .tag = COC_MAX_TAG,
                  .len = 4096, .seq = 1ull << 40, .offset = 8192, .total = 1 << 20, .rcookie = 5};
    coc__hdr back;
    const char *why = NULL;
    coc__hdr_encode(&h, b);
    CHECK(b[0] == COC__WIRE_MAGIC && b[1] == COC__WIRE_VERSION && b[2] == COC__DATA);
    CHECK(b[8] == 7 && b[9] == 0); /* little-endian source */
    CHECK(coc__hdr_decode(b, &back, &why) == 0);
    CHECK(back.type == h.type && back.context == h.context && back.source == h.source &&
          back.dest == h.dest && back.tag == h.tag && back.len == h.len && back.seq == h.seq &&
          back.offset == h.offset && back.total == h.total && back.rcookie == h.rcookie &&
          back.scookie == 0 && back.flags == 0);

    coc__hdr x = eager();
    CHECK(decodes(&x));
    x.type = 0;                                   CHECK(!decodes(&x));
    x = eager(); x.type = COC__TYPE_LAST;         CHECK(!decodes(&x));
    x = eager(); x.flags = 1;                     CHECK(!decodes(&x));
    x = eager(); x.dest = x.source;               CHECK(!decodes(&x));
    x = eager(); x.tag = -1;                      CHECK(!decodes(&x));
    x = eager(); x.total = 99;                    CHECK(!decodes(&x));
    x = eager(); x.offset = 1;                    CHECK(decodes(&x)); /* an acknowledgement */
    x = eager(); x.scookie = 1;                   CHECK(!decodes(&x));
    x = eager(); x.len = x.total = COC__MAX_PAYLOAD + 1; CHECK(!decodes(&x));
    x = eager(); x.len = x.total = COC__MAX_PAYLOAD;     CHECK(decodes(&x));
    x = (coc__hdr){.type = COC__RTS, .source = 1, .dest = 2, .total = 1 << 30, .scookie = 1};
    CHECK(decodes(&x));
    x.total = COC__MAX_MESSAGE + 1;               CHECK(!decodes(&x));
    x.total = 10; x.scookie = 0;                  CHECK(!decodes(&x));
    x.scookie = 1; x.len = 1;                     CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__CTS, .source = 2, .dest = 1, .total = 10, .scookie = 1, .rcookie = 2};
    CHECK(decodes(&x));
    x.rcookie = 0;                                CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__DATA, .source = 1, .dest = 2, .len = 10, .offset = 90, .total = 100, .rcookie = 3};
    CHECK(decodes(&x));
    x.offset = 91;                                CHECK(!decodes(&x));
    x.offset = UINT64_MAX - 5;                    CHECK(!decodes(&x)); /* no overflow */
    x.offset = 0; x.len = 0;                      CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__ERROR, .source = 5, .dest = 1, .tag = COC_EPEERLOST};
    CHECK(decodes(&x));
    x.tag = COC_EPROTO;                           CHECK(!decodes(&x));
    x.tag = COC_ENOROUTE; x.len = 1;              CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__ERROR, .source = 5, .dest = 1, .tag = COC_EPEERLOST, .rcookie = 7};
    CHECK(decodes(&x));                           /* one failed transfer */
    x.tag = COC_ENOROUTE;                         CHECK(!decodes(&x));
    x.tag = COC_EPEERLOST; x.scookie = 1;         CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__BYE, .source = 5, .dest = 1};
    CHECK(decodes(&x));
    x.total = 1;                                  CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__CREDIT, .source = 2, .dest = 1, .total = 4096};
    CHECK(decodes(&x));
    x.total = 0;                                  CHECK(decodes(&x)); /* cumulative, mod 2^40 */
    x.total = (uint64_t)1 << 40;                  CHECK(!decodes(&x));
    x.total = 1; x.len = 1;                       CHECK(!decodes(&x));
    x.len = 0; x.tag = 3;                         CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__RTS, .flags = 1, .source = 1, .dest = 2, .total = 10, .scookie = 1};
    CHECK(decodes(&x));                           /* answer DONE */
    x.flags = 2;                                  CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__PATH, .source = 2, .dest = 1};
    CHECK(decodes(&x));
    x.seq = 1;                                    CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__PING, .source = 2, .dest = 1};
    CHECK(decodes(&x));
    x.total = 1;                                  CHECK(!decodes(&x));
    x = (coc__hdr){.type = COC__DONE, .source = 2, .dest = 1, .seq = 4, .offset = 3, .scookie = 9};
    CHECK(decodes(&x));
    x.scookie = 0;                                CHECK(!decodes(&x));
    coc__hdr_encode(&h, b);
    b[0] ^= 1;
    CHECK(coc__hdr_decode(b, &back, &why) == COC_EPROTO && why && strstr(why, "magic"));
    coc__hdr_encode(&h, b);
    b[1] = 2;
    CHECK(coc__hdr_decode(b, &back, &why) == COC_EPROTO && strstr(why, "version"));

    /* handshake preamble */
    coc__hello hi = {.role = COC__ROLE_CONNECTOR, .flags = COC__HELLO_GATEWAY, .id = 42,
                     .incarnation = 0x01020304}, hb;
    memset(hi.nonce, 0xab, sizeof hi.nonce);
    uint8_t hb_bytes[COC__HELLO_LEN];
    coc__hello_encode(&hi, hb_bytes);
    CHECK(memcmp(hb_bytes, "COCH", 4) == 0);
    CHECK(coc__hello_decode(hb_bytes, &hb, NULL) == 0 && hb.id == 42 && hb.role == hi.role &&
          hb.flags == hi.flags && hb.incarnation == hi.incarnation &&
          memcmp(hb.nonce, hi.nonce, sizeof hi.nonce) == 0);
    hb_bytes[5] = 3;
    CHECK(coc__hello_decode(hb_bytes, &hb, &why) == COC_EPROTO);
    coc__hello_encode(&hi, hb_bytes);
    hb_bytes[7] = 0x80;
    CHECK(coc__hello_decode(hb_bytes, &hb, &why) == COC_EPROTO);
    coc__hello_encode(&hi, hb_bytes);
    memset(hb_bytes + 12, 0, 4); /* every engine has an incarnation */
    CHECK(coc__hello_decode(hb_bytes, &hb, &why) == COC_EPROTO && strstr(why, "incarnation"));
    coc__hello_encode(&hi, hb_bytes);
    hb_bytes[4] = 1; /* the handshake before the incarnation: named, not just refused */
    CHECK(coc__hello_decode(hb_bytes, &hb, &why) == COC_EPROTO && strstr(why, "version 1"));
    coc__hello_encode(&hi, hb_bytes);
    memcpy(hb_bytes, "HTTP", 4);
    CHECK(coc__hello_decode(hb_bytes, &hb, &why) == COC_EPROTO);
    /* the record layer and shared memory exclude each other (a marked link is a socket) */
    coc__hello both = hi;
    both.flags = COC__HELLO_SHM | COC__HELLO_SEAL;
    coc__hello_encode(&both, hb_bytes);
    CHECK(coc__hello_decode(hb_bytes, &hb, &why) == COC_EPROTO && strstr(why, "together"));
    both.flags = COC__HELLO_SEAL | COC__HELLO_ZSTD;
    coc__hello_encode(&both, hb_bytes);
    CHECK(coc__hello_decode(hb_bytes, &hb, NULL) == 0 && hb.flags == both.flags);

    /* proofs differ by role, nonce, id, incarnation and secret */
    coc__hello acc = {.role = COC__ROLE_ACCEPTOR, .id = 7, .incarnation = 5};
    const uint8_t s1[] = "0123456789abcdef", s2[] = "0123456789abcdeg";
    uint8_t p1[32], p2[32];
    coc__proof(s1, 16, COC__ROLE_CONNECTOR, &hi, &acc, p1);
    coc__proof(s1, 16, COC__ROLE_ACCEPTOR, &hi, &acc, p2);
    CHECK(memcmp(p1, p2, 32) != 0);
    coc__proof(s2, 16, COC__ROLE_CONNECTOR, &hi, &acc, p2);
    CHECK(memcmp(p1, p2, 32) != 0);
    acc.id = 8;
    coc__proof(s1, 16, COC__ROLE_CONNECTOR, &hi, &acc, p2);
    CHECK(memcmp(p1, p2, 32) != 0);
    acc.id = 7;
    acc.incarnation = 6;
    coc__proof(s1, 16, COC__ROLE_CONNECTOR, &hi, &acc, p2);
    CHECK(memcmp(p1, p2, 32) != 0);
    acc.incarnation = 5;
    acc.nonce[0] = 1;
    coc__proof(s1, 16, COC__ROLE_CONNECTOR, &hi, &acc, p2);
    CHECK(memcmp(p1, p2, 32) != 0);

    /* pair keys: the same for both orders, different for every id, kind and secret */
    uint8_t k1[COC_KEY_LEN], k2[COC_KEY_LEN];
    CHECK(coc_pair_key(s1, 16, 3, 0, 9, COC_PEER_GATEWAY, k1) == 0);
    CHECK(coc_pair_key(s1, 16, 9, COC_PEER_GATEWAY, 3, 0, k2) == 0 && memcmp(k1, k2, 32) == 0);
    CHECK(coc_pair_key(s1, 16, 3, 0, 9, 0, k2) == 0 && memcmp(k1, k2, 32) != 0);
    CHECK(coc_pair_key(s1, 16, 4, 0, 9, COC_PEER_GATEWAY, k2) == 0 && memcmp(k1, k2, 32) != 0);
    CHECK(coc_pair_key(s2, 16, 3, 0, 9, COC_PEER_GATEWAY, k2) == 0 && memcmp(k1, k2, 32) != 0);
    CHECK(coc_pair_key(s1, 15, 3, 0, 9, 0, k2) == COC_EINVAL);
    CHECK(coc_pair_key(s1, 16, 3, 2, 9, 0, k2) == COC_EINVAL);
    CHECK_DONE();
}
