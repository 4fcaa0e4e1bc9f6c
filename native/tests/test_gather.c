/* test_gather.c — receives of unknown size (coc_irecv_alloc) and gather-sends
 * (coc_isendv): one message from several buffers, received into a buffer of its exact
 * size, eager and rendezvous, posted before and after arrival, through a gateway, to
 * itself, and truncated at the receiver's maximum. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engines.h"

#define EAGER 2048
#define FRAGMENT 4096

/* Fill n bytes with a pattern that depends on the position and seed. */
static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 131u + seed);
}

/* Send lens[0..n) as one gather message from a to b's id, and receive it at b into an
 * engine buffer, posted before (early) or after the message arrived; check every byte. */
static void roundtrip(coc_engine *a, coc_engine *b, uint32_t to, uint32_t from,
                      const size_t *lens, size_t n, int early, int tag)
{
    coc_iovec iov[8];
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i];
    uint8_t *whole = malloc(total + 1), *at = whole;
    for (size_t i = 0; i < n; i++) {
        fill(at, lens[i], (unsigned)(i + 7));
        iov[i] = (coc_iovec){at, lens[i]};
        at += lens[i];
    }
    /* the sender's buffers are separate copies, so a join could not pass by accident */
    uint8_t *parts[8];
    for (size_t i = 0; i < n; i++) {
        parts[i] = malloc(lens[i] + 1);
        memcpy(parts[i], iov[i].base, lens[i]);
        iov[i].base = parts[i];
    }
    coc_request *s = NULL, *r = NULL;
    if (early)
        CHECK_RC(coc_irecv_alloc(b, (int32_t)from, 3, tag, SIZE_MAX, &r));
    CHECK_RC(coc_isendv(a, to, 3, tag, iov, n, &s));
    if (!early) {
        coc_status st;
        CHECK_RC(coc_probe(b, (int32_t)from, 3, tag, 10 * T_SECOND, &st));
        CHECK(st.count == total);
        CHECK_RC(coc_irecv_alloc(b, (int32_t)from, 3, tag, SIZE_MAX, &r));
    }
    coc_status st = t_wait(r);
    CHECK(st.error == 0 && st.count == total && st.source == (int32_t)from && st.tag == tag);
    CHECK(t_wait(s).error == 0);
    size_t len = 99;
    uint8_t *got = coc_request_take_buffer(r, &len);
    CHECK(got != NULL && len == total);
    CHECK(got && memcmp(got, whole, total) == 0);
    CHECK(((uintptr_t)got & 63) == 0 || !early); /* an adopted eager payload is malloc's */
    CHECK(coc_request_take_buffer(r, &len) == NULL && len == 0); /* taken once */
    coc_buffer_free(got);
    coc_request_free(r);
    coc_request_free(s);
    for (size_t i = 0; i < n; i++)
        free(parts[i]);
    free(whole);
}

int main(void)
{
    coc_engine *a = t_open(1, 0, 1, EAGER, FRAGMENT, 0), *b = t_open(2, 0, 1, EAGER, FRAGMENT, 0);
    t_know(a, 2, b, 1);
    t_know(b, 1, a, 1);
    t_route(a, 2, 2);
    t_route(b, 1, 1);
    static const size_t small[] = {5, 0, 100, 1};
    static const size_t large[] = {1000, 5000, 10, 9000, 4096, 1};   /* spans fragments */
    static const size_t one[] = {40000};
    for (int early = 0; early <= 1; early++) {
        roundtrip(a, b, 2, 1, small, 4, early, 10 + early);
        roundtrip(a, b, 2, 1, large, 6, early, 20 + early);
        roundtrip(a, b, 2, 1, one, 1, early, 30 + early);
        roundtrip(a, a, 1, 1, large, 6, early, 40 + early); /* to itself */
    }

    /* through a gateway: the DATA frames of a gather are forwarded like any others */
    coc_engine *g = t_open(10, COC_ENGINE_FORWARD, 1, EAGER, FRAGMENT, 0);
    coc_engine *c = t_open(3, 0, 1, EAGER, FRAGMENT, 0);
    t_know(a, 10, g, 1);
    t_know(c, 10, g, 1);
    t_know(g, 1, a, 1);
    t_know(g, 3, c, 1);
    t_route(a, 3, 10);
    t_route(c, 1, 10);
    t_route(g, 1, 1);
    t_route(g, 3, 3);
    roundtrip(a, c, 3, 1, large, 6, 1, 50);
    roundtrip(a, c, 3, 1, large, 6, 0, 51);

    /* a maximum below the message's size: truncated, the first max bytes delivered */
    uint8_t msg[300];
    fill(msg, sizeof msg, 1);
    coc_request *s, *r;
    for (int big = 0; big <= 1; big++) {
        size_t n = big ? sizeof msg : 100, len;
        coc_iovec iov[2] = {{msg, 10}, {msg + 10, n - 10}};
        CHECK_RC(coc_irecv_alloc(b, 1, 4, 60, 64, &r));
        CHECK_RC(coc_isendv(a, 2, 4, 60, iov, 2, &s));
        coc_status st = t_wait(r);
        CHECK(st.error == COC_ETRUNC && st.count == n);
        uint8_t *got = coc_request_take_buffer(r, &len);
        CHECK(got && len == 64 && memcmp(got, msg, 64) == 0);
        coc_buffer_free(got);
        t_wait(s);
        coc_request_free(r);
        coc_request_free(s);
    }

    /* a buffer not taken is freed with its request (the sanitizer build checks it) */
    CHECK_RC(coc_irecv_alloc(b, 1, 5, 70, SIZE_MAX, &r));
    coc_iovec iov1 = {msg, 50};
    CHECK_RC(coc_isendv(a, 2, 5, 70, &iov1, 1, &s));
    CHECK(t_wait(r).count == 50);
    t_wait(s);
    coc_request_free(r);
    coc_request_free(s);

    /* bad arguments */
    coc_iovec bad = {NULL, 5};
    CHECK(coc_isendv(a, 2, 0, 0, &bad, 1, &s) == COC_EINVAL);
    CHECK(coc_isendv(a, 2, 0, 0, &iov1, COC_IOV_MAX + 1, &s) == COC_EINVAL);
    CHECK(coc_irecv_alloc(b, -2, 0, 0, 10, &r) == COC_EINVAL);
    size_t len = 5;
    CHECK(coc_request_take_buffer(NULL, &len) == NULL && len == 0);

    coc_engine_close(c);
    coc_engine_close(g);
    coc_engine_close(a);
    coc_engine_close(b);
    CHECK_DONE();
}
