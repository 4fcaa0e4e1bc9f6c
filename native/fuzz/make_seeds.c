/* make_seeds.c — write the committed seed corpus (run from native/ once:
 *   cc -std=c11 -D_GNU_SOURCE -Iinclude -Isrc fuzz/make_seeds.c src/wire.c src/crypto.c -lcrypto && ./a.out)
 * fuzz_wire: a valid hello, then valid headers of every frame type.
 * fuzz_session: byte 0 even (handshake first), then valid frames with payloads, and a raw
 * non-coc client (byte 0 odd). */
#include <stdio.h>
#include <string.h>

#include "coc/coc.h"
#include "wire.h"

static void save(const char *target, const char *name, const uint8_t *buf, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "fuzz/corpus/%s/%s", target, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(buf, 1, len, f);
        fclose(f);
    }
}

static void wire_seed(const char *name, const coc__hdr *h, size_t n)
{
    uint8_t buf[COC__HELLO_LEN + 8 * COC__HDR_LEN];
    coc__hello hello = {.role = COC__ROLE_CONNECTOR, .id = 7, .incarnation = 7};
    memset(hello.nonce, 0x42, sizeof hello.nonce);
    coc__hello_encode(&hello, buf);
    for (size_t i = 0; i < n; i++)
        coc__hdr_encode(&h[i], buf + COC__HELLO_LEN + i * COC__HDR_LEN);
    save("fuzz_wire", name, buf, COC__HELLO_LEN + n * COC__HDR_LEN);
}

static void session_seed(const char *name, const coc__hdr *h, size_t n)
{
    uint8_t buf[1 + 8 * (COC__HDR_LEN + 8)];
    size_t len = 1;
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        coc__hdr_encode(&h[i], buf + len);
        len += COC__HDR_LEN;
        memcpy(buf + len, "12345678", h[i].len);
        len += h[i].len;
    }
    save("fuzz_session", name, buf, len);
}

int main(void)
{
    coc__hdr eager = {.type = COC__EAGER, .context = 0, .source = 7, .dest = 2, .tag = 3, .len = 8, .total = 8};
    coc__hdr rts = {.type = COC__RTS, .source = 7, .dest = 2, .tag = 3, .total = 100000, .scookie = 0x100000001ull};
    coc__hdr cts = {.type = COC__CTS, .source = 7, .dest = 2, .tag = 3, .total = 10, .scookie = 0x100000001ull,
                    .rcookie = 5};
    coc__hdr data = {.type = COC__DATA, .source = 7, .dest = 2, .tag = 3, .len = 8, .total = 8,
                     .rcookie = 0x100000001ull};
    coc__hdr fwd = {.type = COC__EAGER, .source = 7, .dest = 9, .tag = 3, .len = 8, .total = 8};
    coc__hdr err = {.type = COC__ERROR, .source = 9, .dest = 2, .tag = COC_EPEERLOST};
    coc__hdr bye = {.type = COC__BYE, .source = 7, .dest = 2};
    coc__hdr credit = {.type = COC__CREDIT, .source = 7, .dest = 2, .total = 65600};
    const coc__hdr *one[] = {&eager, &rts, &cts, &data, &fwd, &err, &bye, &credit};
    const char *names[] = {"eager", "rts", "cts", "data", "forward", "error", "bye", "credit"};
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        wire_seed(names[i], one[i], 1);
        session_seed(names[i], one[i], 1);
    }
    coc__hdr all[5] = {eager, rts, err, fwd, bye};
    wire_seed("all", all, 5);
    session_seed("all", all, 5);
    const char http[] = "\001GET / HTTP/1.1\r\nHost: coc\r\n\r\n..................";
    save("fuzz_session", "raw_http", (const uint8_t *)http, sizeof http - 1);
    return 0;
}
