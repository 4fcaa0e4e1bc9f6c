/*
 * fuzz_record.c — libFuzzer target for the record layer's receiving side (record.h): the
 * input is what a peer of a marked, compress-only link sends after the handshake (an
 * encrypted link refuses anything it did not seal, so the unsealed decoder and the zstd and
 * lz4 decompressors see untrusted bytes only here). The first byte picks how the stream is
 * split into reads; every read must be taken without a crash, and a bad record must be
 * refused (COC_EPROTO) rather than read past.
 */
#include <stdint.h>
#include <string.h>

#include "coc/coc.h"
#include "record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t dst[3 * COC__REC_MAX];
    if (!size)
        return 0;
    size_t step = 1 + data[0] * 97u;
    data++, size--;
    uint8_t key[32] = {0}, nonce[32] = {0};
    coc__rec *r = coc__rec_new(key, 32, nonce, nonce, 32, 0x8, 0, 0, COC__CODEC_NONE);
    if (!r)
        return 0;
    while (size) {
        size_t room;
        uint8_t *space = coc__rec_rx_space(r, &room);
        size_t n = size < step ? size : step;
        if (n > room)
            n = room;
        if (!n)
            break;
        memcpy(space, data, n);
        coc__rec_rx_fed(r, n);
        data += n, size -= n;
        const char *why = NULL;
        size_t wire, plain;
        ssize_t got;
        while ((got = coc__rec_rx_take(r, dst, sizeof dst, &why, &wire, &plain)) > 0)
            ;
        if (got < 0)
            break;
    }
    coc__rec_free(r);
    return 0;
}
