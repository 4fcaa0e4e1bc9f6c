/*
 * fuzz_wire.c — libFuzzer target for what a peer controls first: the handshake preamble
 * and the frame header decoder. The input is read as a connection would be: a 48-byte
 * hello, then 64-byte frame headers back to back. The decoders must never read out of
 * bounds, and every header they accept must satisfy the limits the engine relies on
 * before it allocates (checked here with abort(), which libFuzzer reports).
 */
#include <stdlib.h>
#include <string.h>

#include "coc/coc.h"
#include "wire.h"

static void check_header(const uint8_t *in)
{
    coc__hdr h;
    uint8_t again[COC__HDR_LEN];
    if (coc__hdr_decode(in, &h, NULL) != 0)
        return;
    if (h.len > COC__MAX_PAYLOAD || h.total > COC__MAX_MESSAGE || h.source == h.dest)
        abort();
    if (h.type == COC__EAGER && h.len != h.total)
        abort();
    if (h.type == COC__DATA && (h.offset > h.total || h.len > h.total - h.offset || !h.rcookie))
        abort();
    if ((h.type == COC__RTS || h.type == COC__CTS || h.type == COC__ERROR || h.type == COC__BYE ||
         h.type == COC__CREDIT || h.type == COC__PATH || h.type == COC__PING ||
         h.type == COC__DONE) && h.len)
        abort();
    coc__hdr_encode(&h, again); /* accepted headers are canonical: they re-encode to the input */
    if (memcmp(again, in, COC__HDR_LEN) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= COC__HELLO_LEN) {
        coc__hello h;
        uint8_t again[COC__HELLO_LEN], proof[COC__PROOF_LEN];
        if (coc__hello_decode(data, &h, NULL) == 0) {
            coc__hello_encode(&h, again);
            if (memcmp(again, data, COC__HELLO_LEN) != 0)
                abort();
            coc__proof(data, 16, h.role, &h, &h, proof);
        }
        data += COC__HELLO_LEN;
        size -= COC__HELLO_LEN;
    }
    for (; size >= COC__HDR_LEN; data += COC__HDR_LEN, size -= COC__HDR_LEN)
        check_header(data);
    if (size) { /* a short tail, as a partial read leaves it, must not be read past */
        uint8_t tail[COC__HDR_LEN] = {0};
        memcpy(tail, data, size);
        check_header(tail);
    }
    return 0;
}
