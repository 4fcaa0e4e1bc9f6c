/* test_forward.c — gateway engines: one hop, two hops in a row, two gateways sharing
 * load while every (source, destination) stream stays in order, and size classes: small
 * messages direct, large ones' bytes striped over two gateways by weight. */
#include <stdlib.h>

#include "engines.h"

#define BIG (3u << 20)

/* src sends `count` messages (every 8th one rendezvous) to dst; dst checks order and bytes. */
static void stream(coc_engine *src, uint32_t src_id, coc_engine *dst, uint32_t dst_id, int count)
{
    uint8_t *payload = malloc(BIG), *in = malloc(BIG);
    for (size_t i = 0; i < BIG; i++)
        payload[i] = (uint8_t)(i ^ (i >> 8) ^ src_id);
    coc_request **s = calloc((size_t)count, sizeof *s), *r;
    for (int i = 0; i < count; i++) {
        size_t n = i % 8 == 7 ? BIG : 16 + (size_t)i;
        memcpy(payload, &i, sizeof i);
        /* rendezvous reads the buffer in place: give each big send its own copy */
        uint8_t *buf = n == BIG ? payload : memcpy(malloc(n), payload, n);
        CHECK_RC(coc_isend(src, dst_id, 1, 3, buf, n, &s[i]));
        if (n == BIG) {
            /* keep payload alive and unchanged until this send completes */
            CHECK_RC(coc_irecv(dst, (int32_t)src_id, 1, 3, in, BIG, &r));
            coc_status st = t_wait(r);
            CHECK(st.error == 0 && st.count == BIG && memcmp(in, payload, BIG) == 0);
            coc_request_free(r);
        } else {
            CHECK_RC(coc_irecv(dst, (int32_t)src_id, 1, 3, in, BIG, &r));
            coc_status st = t_wait(r);
            int got;
            memcpy(&got, in, sizeof got);
            CHECK(st.error == 0 && st.count == n && got == i);
            coc_request_free(r);
        }
        CHECK(t_wait(s[i]).error == 0);
        coc_request_free(s[i]);
        if (buf != payload)
            free(buf); /* only now: a send may read its buffer until it completes */
    }
    free(s);
    free(payload);
    free(in);
}

static void one_and_two_hops(void)
{
    /* 1 -- 10 -- 11 -- 2, and 3 -- 10 -- 2 skipping 11 is not allowed: 10 routes 2 via 11 */
    coc_engine *a = t_open(1, 0, 1, 0, 0, 0), *b = t_open(2, 0, 1, 0, 0, 0);
    coc_engine *g1 = t_open(10, COC_ENGINE_FORWARD, 1, 0, 0, 0);
    coc_engine *g2 = t_open(11, COC_ENGINE_FORWARD, 1, 0, 0, 0);
    t_know(a, 10, g1, 1);
    t_know(g1, 1, a, 1);
    t_know(g1, 11, g2, 1);
    t_know(g2, 10, g1, 1);
    t_know(g2, 2, b, 1);
    t_know(b, 11, g2, 1);
    t_route(a, 2, 10);
    t_route(a, 11, 10);
    t_route(g1, 2, 11);
    t_route(g1, 1, 1);
    t_route(g1, 11, 11);
    t_route(g2, 2, 2);
    t_route(g2, 1, 10);
    t_route(b, 1, 11);
    t_route(b, 11, 11);

    stream(a, 1, b, 2, 24);
    stream(b, 2, a, 1, 24);

    /* one hop: a -> 11 (the second gateway is an endpoint too) */
    int x = 5, y = 0;
    coc_request *s, *r;
    CHECK_RC(coc_irecv(g2, 1, 0, 0, &y, sizeof y, &r));
    CHECK_RC(coc_isend(a, 11, 0, 0, &x, sizeof x, &s));
    CHECK(t_wait(r).error == 0 && y == 5);
    coc_request_free(r);
    coc_request_free(s);

    coc_stats sa, sg1, sg2;
    coc_engine_stats(a, &sa);
    coc_engine_stats(g1, &sg1);
    coc_engine_stats(g2, &sg2);
    CHECK(sa.connections_open == 1); /* a never connected to b: reachability */
    CHECK(sg1.frames_forwarded > 48 && sg2.frames_forwarded > 48);
    CHECK(sg1.bytes_forwarded >= 6ull * BIG && sg2.bytes_forwarded >= 6ull * BIG);
    CHECK(sg1.forward_bytes_buffered == 0 && sg1.forward_bytes_buffered_max > 0);
    coc_engine_close(a);
    coc_engine_close(b);
    coc_engine_close(g1);
    coc_engine_close(g2);
}

/* Sources 1..4 reach destination 5 through gateways 10 and 11 (weights 1:1). */
static void shared_load(void)
{
    enum { NSRC = 4, MSGS = 300 };
    coc_engine *src[NSRC], *dst = t_open(5, 0, 1, 0, 0, 0);
    coc_engine *g[2] = {t_open(10, COC_ENGINE_FORWARD, 1, 0, 0, 0), t_open(11, COC_ENGINE_FORWARD, 1, 0, 0, 0)};
    uint32_t hops[2] = {10, 11}, w[2] = {1, 1};
    for (int k = 0; k < 2; k++) {
        t_know(g[k], 5, dst, 0);
        t_know(dst, hops[k], g[k], 0);
        t_route(g[k], 5, 5);
    }
    for (int i = 0; i < NSRC; i++) {
        uint32_t id = (uint32_t)i + 1;
        src[i] = t_open(id, 0, 1, 0, 0, 0);
        for (int k = 0; k < 2; k++) {
            t_know(src[i], hops[k], g[k], 0);
            t_route(g[k], id, id);
        }
        CHECK_RC(coc_engine_set_route(src[i], 5, hops, w, 2));
        CHECK_RC(coc_engine_set_route(dst, id, hops, w, 2));
    }
    /* every source fires all its messages at once; the destination takes them with
     * ANY_SOURCE and checks each source's sequence is increasing */
    static uint32_t msgs[NSRC][MSGS][2];
    static coc_request *s[NSRC][MSGS];
    for (int m = 0; m < MSGS; m++)
        for (int i = 0; i < NSRC; i++) {
            msgs[i][m][0] = (uint32_t)i;
            msgs[i][m][1] = (uint32_t)m;
            CHECK_RC(coc_isend(src[i], 5, 0, m % 5, msgs[i][m], sizeof msgs[i][m], &s[i][m]));
        }
    int next[NSRC] = {0};
    for (int k = 0; k < NSRC * MSGS; k++) {
        uint32_t in[2];
        coc_request *r;
        CHECK_RC(coc_irecv(dst, COC_ANY_SOURCE, 0, COC_ANY_TAG, in, sizeof in, &r));
        coc_status st = t_wait(r);
        coc_request_free(r);
        if (st.error || st.source < 1 || st.source > NSRC) {
            check_failures++;
            break;
        }
        CHECK(in[0] == (uint32_t)st.source - 1 && in[1] == (uint32_t)next[in[0]]);
        next[in[0]] = (int)in[1] + 1;
    }
    for (int i = 0; i < NSRC; i++) {
        CHECK(next[i] == MSGS);
        for (int m = 0; m < MSGS; m++)
            coc_request_free(s[i][m]);
    }
    coc_stats s0, s1;
    coc_engine_stats(g[0], &s0);
    coc_engine_stats(g[1], &s1);
    CHECK(s0.frames_forwarded > 0 && s1.frames_forwarded > 0); /* both gateways carried load */
    for (int i = 0; i < NSRC; i++)
        coc_engine_close(src[i]);
    coc_engine_close(dst);
    coc_engine_close(g[0]);
    coc_engine_close(g[1]);
}

/* Sources 1..3 stream big and small messages at once through gateway 10 (small window,
 * small fragments) to 5, which receives them out of sending order across sources. */
static void concurrent_streams(void)
{
    enum { NSRC = 3, PER = 6 };
    const size_t big = 2u << 20;
    coc_engine *dst = t_open(5, 0, 1, 0, 0, 0);
    coc_engine *g = t_open(10, COC_ENGINE_FORWARD, 1, 0, 0, 128u << 10);
    coc_engine *src[NSRC];
    static uint8_t *out[NSRC][PER], *in[NSRC][PER];
    coc_request *s[NSRC][PER], *r[NSRC][PER];
    t_know(g, 5, dst, 1);
    t_know(dst, 10, g, 1);
    t_route(g, 5, 5);
    for (int i = 0; i < NSRC; i++) {
        uint32_t id = (uint32_t)i + 1;
        src[i] = t_open(id, 0, 1, 0, 32u << 10, 0); /* 32 KiB fragments: many frames */
        t_know(src[i], 10, g, 1);
        t_route(src[i], 5, 10);
        t_route(g, id, id);
        t_route(dst, id, 10);
    }
    /* receives posted in reverse source order, so matching cannot rely on arrival order */
    for (int i = NSRC - 1; i >= 0; i--)
        for (int m = 0; m < PER; m++) {
            size_t n = m % 2 ? big : 1000;
            in[i][m] = calloc(1, n);
            CHECK_RC(coc_irecv(dst, i + 1, 0, m, in[i][m], n, &r[i][m]));
        }
    for (int m = 0; m < PER; m++)
        for (int i = 0; i < NSRC; i++) {
            size_t n = m % 2 ? big : 1000;
            out[i][m] = malloc(n);
            for (size_t k = 0; k < n; k++)
                out[i][m][k] = (uint8_t)(k * (i + 3) + m);
            CHECK_RC(coc_isend(src[i], 5, 0, m, out[i][m], n, &s[i][m]));
        }
    for (int i = 0; i < NSRC; i++)
        for (int m = 0; m < PER; m++) {
            size_t n = m % 2 ? big : 1000;
            coc_status st = t_wait(r[i][m]);
            CHECK(st.error == 0 && st.count == n && st.source == i + 1 && st.tag == m);
            CHECK(memcmp(in[i][m], out[i][m], n) == 0);
            CHECK(t_wait(s[i][m]).error == 0);
            coc_request_free(r[i][m]);
            coc_request_free(s[i][m]);
            free(in[i][m]);
            free(out[i][m]);
        }
    coc_stats sg;
    coc_engine_stats(g, &sg);
    CHECK(sg.forward_bytes_buffered == 0);
    CHECK(sg.forward_bytes_buffered_max <= (128u << 10) + NSRC * ((32u << 10) + 64));
    for (int i = 0; i < NSRC; i++)
        coc_engine_close(src[i]);
    coc_engine_close(dst);
    coc_engine_close(g);
}

/* 1 -> 5: small class direct, large class striped 2:1 over gateways 10 and 11 (the
 * way back for CTS is direct too). The gateways carry exactly the DATA bytes, 2:1. */
static void size_classes(void)
{
    enum { FRAG = 16384 };
    coc_engine *src = t_open(1, 0, 1, FRAG, FRAG, 0), *dst = t_open(5, 0, 1, FRAG, FRAG, 0);
    coc_engine *g[2] = {t_open(10, COC_ENGINE_FORWARD, 1, 0, 0, 0), t_open(11, COC_ENGINE_FORWARD, 1, 0, 0, 0)};
    uint32_t hops[2] = {10, 11}, w[2] = {2, 1}, five = 5, one = 1;
    t_know(src, 5, dst, 1);
    t_know(dst, 1, src, 1);
    for (int k = 0; k < 2; k++) {
        t_know(src, hops[k], g[k], 1);
        t_know(g[k], 5, dst, 1);
        t_route(g[k], 5, 5);
    }
    CHECK(coc_engine_set_route_class(src, 5, 2, &five, NULL, 1) == COC_EINVAL);
    CHECK(coc_engine_set_route_class(src, 5, -1, &five, NULL, 1) == COC_EINVAL);
    CHECK_RC(coc_engine_set_route_class(src, 5, COC_CLASS_SMALL, &five, NULL, 1));
    CHECK_RC(coc_engine_set_route_class(src, 5, COC_CLASS_LARGE, hops, w, 2));
    CHECK_RC(coc_engine_set_route(dst, 1, &one, NULL, 1));
    size_t sizes[] = {10, FRAG, FRAG + 1, 30 * FRAG + 7, 5, 3 * FRAG}, large = 0;
    uint8_t *out = malloc(64 * FRAG), *in = malloc(64 * FRAG);
    for (size_t i = 0; i < 64 * FRAG; i++)
        out[i] = (uint8_t)(i * 131 + (i >> 12));
    for (size_t m = 0; m < sizeof sizes / sizeof sizes[0]; m++) {
        coc_request *s, *r;
        memset(in, 0, sizes[m]);
        CHECK_RC(coc_irecv(dst, 1, 0, (int32_t)m, in, 64 * FRAG, &r));
        CHECK_RC(coc_isend(src, 5, 0, (int32_t)m, out, sizes[m], &s));
        coc_status st = t_wait(r);
        CHECK(st.error == 0 && st.count == sizes[m] && memcmp(in, out, sizes[m]) == 0);
        CHECK(t_wait(s).error == 0);
        coc_request_free(s);
        coc_request_free(r);
        if (sizes[m] > FRAG)
            large += sizes[m];
    }
    coc_stats a, b;
    CHECK_RC(coc_engine_stats(g[0], &a));
    CHECK_RC(coc_engine_stats(g[1], &b));
    CHECK(a.bytes_forwarded + b.bytes_forwarded == large);
    CHECK(a.bytes_forwarded <= 2 * b.bytes_forwarded + 2 * FRAG &&
          2 * b.bytes_forwarded <= a.bytes_forwarded + 2 * FRAG);
    free(out);
    free(in);
    coc_engine_close(src);
    coc_engine_close(dst);
    coc_engine_close(g[0]);
    coc_engine_close(g[1]);
}

/* One 8 B ping-pong between a and b through gateway g (tag 7). */
static void pingpong_once(coc_engine *a, coc_engine *b)
{
    uint8_t x[8] = {1}, y[8];
    coc_request *s, *r;
    CHECK_RC(coc_irecv(b, 1, 0, 7, y, sizeof y, &r));
    CHECK_RC(coc_isend(a, 2, 0, 7, x, sizeof x, &s));
    CHECK(t_wait(r).error == 0 && t_wait(s).error == 0);
    coc_request_free(r);
    coc_request_free(s);
    CHECK_RC(coc_irecv(a, 2, 0, 7, x, sizeof x, &r));
    CHECK_RC(coc_isend(b, 1, 0, 7, y, sizeof y, &s));
    CHECK(t_wait(r).error == 0 && t_wait(s).error == 0);
    coc_request_free(r);
    coc_request_free(s);
}

/* A gateway busy forwarding (a round per frame, none of them timed out) still pings its
 * quiet connections every liveness quarter: its housekeeping looks at the clock in the
 * rounds its delay timer fires in, not in every round (progress.c). Endpoint c, connected
 * to g and silent, hears g's pings while a and b ping-pong through g. */
static void busy_gateway_pings(void)
{
    t_liveness_ms = 400;
    coc_engine *a = t_open(1, 0, 1, 0, 0, 0), *b = t_open(2, 0, 1, 0, 0, 0);
    coc_engine *c = t_open(3, 0, 1, 0, 0, 0), *g = t_open(10, COC_ENGINE_FORWARD, 1, 0, 0, 0);
    t_liveness_ms = 0;
    coc_engine *ends[] = {a, b, c};
    for (uint32_t i = 0; i < 3; i++) {
        t_know(ends[i], 10, g, 1);
        t_know(g, i + 1, ends[i], 1);
        t_route(g, i + 1, i + 1);
        for (uint32_t j = 1; j <= 3; j++)
            if (j != i + 1)
                t_route(ends[i], j, 10);
    }
    int x = 3, y = 0; /* c's one message connects it to g; then it stays silent */
    coc_request *s, *r;
    CHECK_RC(coc_irecv(a, 3, 0, 0, &y, sizeof y, &r));
    CHECK_RC(coc_isend(c, 1, 0, 0, &x, sizeof x, &s));
    CHECK(t_wait(r).error == 0 && t_wait(s).error == 0 && y == 3);
    coc_request_free(r);
    coc_request_free(s);
    for (int i = 0; i < 50; i++) /* every connection open: no handshake under way */
        pingpong_once(a, b);
    coc_stats before, now, gs;
    CHECK_RC(coc_engine_stats(c, &before));
    double until = t_now() + 2.0; /* five liveness timeouts of c's */
    while (t_now() < until)
        pingpong_once(a, b);
    CHECK_RC(coc_engine_stats(c, &now));
    CHECK(now.frames_received >= before.frames_received + 3); /* g's pings */
    CHECK(now.peers_lost == 0 && now.connections_open == 1); /* c never found g silent */
    CHECK_RC(coc_engine_stats(g, &gs));
    CHECK(gs.peers_lost == 0 && gs.connections_open == 3);
    coc_engine_close(a);
    coc_engine_close(b);
    coc_engine_close(c);
    coc_engine_close(g);
}

int main(void)
{
    busy_gateway_pings();
    one_and_two_hops();
    shared_load();
    size_classes();
    concurrent_streams();
    CHECK_DONE();
}
