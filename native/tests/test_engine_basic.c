/* test_engine_basic.c — two engines in one process: eager and rendezvous, wildcards,
 * ordering, truncation, probe, cancel, over TCP loopback and over unix sockets. */
#include <poll.h>
#include <stdlib.h>

#include "engines.h"

/* coc_isend_or_done of value from endpoint 1 (engine a) to dest (engine to) completes at
 * once: no request comes back; the value arrives. */
static void sent_at_once(coc_engine *a, uint32_t dest, coc_engine *to, int32_t tag, int value)
{
    int v = 0;
    coc_request *s = (coc_request *)&s, *r;
    CHECK_RC(coc_isend_or_done(a, dest, 0, tag, &value, sizeof value, &s));
    CHECK(s == NULL);
    CHECK_RC(coc_irecv(to, 1, 0, tag, &v, sizeof v, &r));
    CHECK(t_wait(r).error == 0 && v == value);
    coc_request_free(r);
}

static void pair_roundtrip(int tcp_only)
{
    coc_engine *a = t_open(1, 0, 1, 0, 0, 0), *b = t_open(2, 0, 1, 0, 0, 0);
    t_know(a, 2, b, tcp_only);
    t_know(b, 1, a, tcp_only);
    t_route(a, 2, 2);
    t_route(b, 1, 1);
    char out[] = "hello coc", in[32] = {0};
    coc_request *s, *r;
    CHECK_RC(coc_irecv(b, COC_ANY_SOURCE, 7, COC_ANY_TAG, in, sizeof in, &r));
    CHECK_RC(coc_isend(a, 2, 7, 42, out, sizeof out, &s));
    coc_status st = t_wait(r);
    CHECK(st.error == 0 && st.source == 1 && st.tag == 42 && st.count == sizeof out);
    CHECK(strcmp(in, out) == 0);
    st = t_wait(s);
    CHECK(st.error == 0);
    coc_request_free(r);
    coc_request_free(s);

    /* rendezvous both ways, 8 MiB, unexpected first */
    size_t big = 8u << 20;
    uint8_t *src = malloc(big), *dst = calloc(1, big);
    for (size_t i = 0; i < big; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    CHECK_RC(coc_isend(b, 1, 0, 5, src, big, &s));
    coc_status pst = {0};
    CHECK(coc_probe(a, 2, 0, COC_ANY_TAG, 5 * T_SECOND, &pst) == 1);
    CHECK(pst.count == big && pst.tag == 5 && pst.source == 2);
    CHECK_RC(coc_irecv(a, 2, 0, 5, dst, big, &r));
    st = t_wait(r);
    CHECK(st.error == 0 && st.count == big);
    CHECK(memcmp(src, dst, big) == 0);
    CHECK(t_wait(s).error == 0);
    coc_request_free(r);
    coc_request_free(s);

    /* eager messages larger than a connection's read buffer, expected and unexpected */
    for (int posted_first = 0; posted_first < 2; posted_first++) {
        size_t n = 120000;
        memset(dst, 0, n + 1);
        if (posted_first)
            CHECK_RC(coc_irecv(b, 1, 0, 8, dst, big, &r));
        CHECK_RC(coc_isend(a, 2, 0, 8, src + 1, n, &s));
        if (!posted_first) {
            CHECK(coc_probe(b, 1, 0, 8, 5 * T_SECOND, &pst) == 1 && pst.count == n);
            CHECK_RC(coc_irecv(b, 1, 0, 8, dst, big, &r));
        }
        st = t_wait(r);
        CHECK(st.error == 0 && st.count == n && memcmp(dst, src + 1, n) == 0 && dst[n] == 0);
        CHECK(t_wait(s).error == 0);
        coc_request_free(r);
        coc_request_free(s);
    }

    /* truncation, eager and rendezvous: first cap bytes delivered, full count reported */
    memset(dst, 0, big);
    CHECK_RC(coc_isend(a, 2, 0, 1, src, 1000, &s));
    CHECK_RC(coc_irecv(b, 1, 0, 1, dst, 100, &r));
    st = t_wait(r);
    CHECK(st.error == COC_ETRUNC && st.count == 1000 && memcmp(dst, src, 100) == 0 && dst[100] == 0);
    coc_request_free(r);
    coc_request_free(s);
    CHECK_RC(coc_irecv(b, 1, 0, 2, dst, 300000, &r));
    CHECK_RC(coc_isend(a, 2, 0, 2, src, big, &s));
    st = t_wait(r);
    CHECK(st.error == COC_ETRUNC && st.count == big && memcmp(dst, src, 300000) == 0 && dst[300000] == 0);
    CHECK(t_wait(s).error == 0);
    coc_request_free(r);
    coc_request_free(s);

    /* ordering: many messages of mixed sizes from one source keep their order */
    enum { N = 200 };
    coc_request *sr[N], *rr[N];
    static uint32_t vals[N];
    static uint8_t *bufs[N];
    for (int i = 0; i < N; i++) {
        size_t n = (i % 10 == 0) ? 200000 : 4;
        bufs[i] = calloc(1, n);
        memcpy(bufs[i], &i, 4);
        CHECK_RC(coc_isend(a, 2, 3, i % 3, bufs[i], n, &sr[i]));
    }
    static uint8_t got[N][200000];
    for (int i = 0; i < N; i++)
        CHECK_RC(coc_irecv(b, 1, 3, COC_ANY_TAG, got[i], sizeof got[i], &rr[i]));
    for (int i = 0; i < N; i++) {
        st = t_wait(rr[i]);
        memcpy(&vals[i], got[i], 4);
        CHECK(st.error == 0 && vals[i] == (uint32_t)i && st.tag == i % 3);
        CHECK(t_wait(sr[i]).error == 0);
        coc_request_free(rr[i]);
        coc_request_free(sr[i]);
        free(bufs[i]);
    }

    /* tag matching picks the right message; iprobe sees nothing else */
    int x = 1, y = 2, v = 0;
    CHECK_RC(coc_isend(a, 2, 0, 10, &x, sizeof x, &s));
    coc_request *s2;
    CHECK_RC(coc_isend(a, 2, 0, 11, &y, sizeof y, &s2));
    CHECK_RC(coc_irecv(b, 1, 0, 11, &v, sizeof v, &r));
    st = t_wait(r);
    CHECK(v == 2 && st.tag == 11);
    coc_request_free(r);
    CHECK_RC(coc_irecv(b, 1, 0, 10, &v, sizeof v, &r));
    st = t_wait(r);
    CHECK(v == 1 && st.tag == 10);
    CHECK(coc_iprobe(b, COC_ANY_SOURCE, 0, COC_ANY_TAG, &st) == 0);
    coc_request_free(r);
    coc_request_free(s);
    coc_request_free(s2);

    /* iprobe reports an eager message's size; the pollable fd fires on completion */
    CHECK_RC(coc_engine_drain_fd(b));
    struct pollfd pfd = {coc_engine_fd(b), POLLIN, 0};
    CHECK(poll(&pfd, 1, 0) == 0);
    CHECK_RC(coc_isend(a, 2, 9, 6, src, 777, &s));
    CHECK(coc_probe(b, 1, 9, 6, 5 * T_SECOND, &st) == 1 && st.count == 777 && st.tag == 6 && st.source == 1);
    CHECK(coc_iprobe(b, 1, 9, 6, &st) == 1 && st.count == 777);
    CHECK_RC(coc_irecv(b, 1, 9, 6, dst, 1000, &r));
    CHECK(poll(&pfd, 1, 5000) == 1);
    CHECK_RC(coc_engine_drain_fd(b));
    CHECK(poll(&pfd, 1, 0) == 0);
    st = t_wait(r);
    CHECK(st.error == 0 && st.count == 777 && memcmp(dst, src, 777) == 0);
    CHECK(coc_probe(b, 1, 9, 6, 1000000, &st) == COC_ETIMEDOUT);
    coc_request_free(r);
    coc_request_free(s);

    /* cancel and a timed-out wait */
    CHECK_RC(coc_irecv(b, 1, 0, 99, &v, sizeof v, &r));
    CHECK(coc_wait(r, 1000000, &st) == COC_ETIMEDOUT);
    CHECK(coc_cancel(r) == 0);
    st = t_wait(r);
    CHECK(st.error == COC_ECANCELED);
    coc_request_free(r);

    /* no route */
    CHECK(coc_isend(a, 77, 0, 0, &x, sizeof x, &s) == COC_ENOROUTE);

    /* self send */
    CHECK_RC(coc_isend(a, 1, 0, 4, &x, sizeof x, &s));
    CHECK_RC(coc_irecv(a, 1, 0, 4, &v, sizeof v, &r));
    CHECK(t_wait(r).error == 0 && v == 1);
    coc_request_free(r);
    coc_request_free(s);

    /* coc_isend_or_done: a send complete at once comes back released (NULL: to itself, and
     * eager on the open connection), a rendezvous one pending; errors as coc_isend's */
    sent_at_once(a, 1, a, 5, 4);
    sent_at_once(a, 2, b, 6, 3);
    CHECK_RC(coc_irecv(b, 1, 0, 7, dst, big, &r));
    CHECK_RC(coc_isend_or_done(a, 2, 0, 7, src, big, &s));
    CHECK(s != NULL);
    CHECK(t_wait(r).error == 0 && memcmp(src, dst, big) == 0);
    CHECK(t_wait(s).error == 0);
    coc_request_free(r);
    coc_request_free(s);
    CHECK(coc_isend_or_done(a, 77, 0, 0, &x, sizeof x, &s) == COC_ENOROUTE);
    CHECK(coc_isend_or_done(a, 2, 0, -1, &x, sizeof x, &s) == COC_EINVAL);

    coc_stats sa, sb;
    coc_engine_stats(a, &sa);
    coc_engine_stats(b, &sb);
    CHECK(sa.connections_open >= 1 && sa.frames_sent > 0 && sb.frames_received > 0);
    CHECK(sa.auth_failures == 0 && sb.protocol_errors == 0 && sb.unexpected_messages == 0);
    free(src);
    free(dst);
    CHECK_RC(coc_engine_close(a));
    CHECK_RC(coc_engine_close(b));
}

/* The ring size comes from the config only (the library reads no environment): 0 or a
 * power of two within 4 KiB..64 MiB, anything else refused. */
static void shm_ring_config(void)
{
    size_t bad[] = {3000, 65537, 2048, (size_t)128 << 20}, good[] = {4096, 65536, (size_t)64 << 20};
    coc_engine_config cfg;
    coc_engine *e = NULL;
    coc_engine_config_init(&cfg);
    cfg.self_id = 1;
    cfg.secret = t_secret;
    cfg.secret_len = sizeof t_secret - 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg.shm_ring = bad[i];
        CHECK(coc_engine_open(&cfg, &e) == COC_EINVAL);
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cfg.shm_ring = good[i];
        CHECK_RC(coc_engine_open(&cfg, &e));
        CHECK_RC(coc_engine_close(e));
    }
}

int main(void)
{
    shm_ring_config();
    pair_roundtrip(1); /* TCP loopback */
    pair_roundtrip(0); /* unix socket (same host) */
    CHECK_DONE();
}
