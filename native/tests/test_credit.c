/* test_credit.c — end-to-end eager credit (docs/wire-protocol.md "Credits"): a flood of
 * eager-sized messages towards a receiver that posts nothing takes at most the credit in
 * its memory (the rest wait as rendezvous envelopes), everything arrives in order once it
 * receives, and the credit comes back. Across a gateway too (gateways only forward CREDIT
 * frames). A frame above the receiver's eager limit is a protocol error naming the sender. */
#include <stdlib.h>
#include <unistd.h>

#include "engines.h"

#define N 100
#define LEN 60000
#define EAGER (128u << 10)
#define CREDIT (8 * (EAGER + 64)) /* COC__CREDIT_EAGERS x (eager limit + header) */

static coc_stats stats(coc_engine *e)
{
    coc_stats st;
    coc_engine_stats(e, &st);
    return st;
}

/* a sends N messages to b (through gateway g when given), b receives them late. */
static void flood(coc_engine *a, coc_engine *b)
{
    uint8_t *src = malloc(N + LEN), *dst = malloc(LEN);
    for (size_t i = 0; i < N + LEN; i++)
        src[i] = (uint8_t)(i * 11 + 1);
    coc_request *s[N], *r;
    for (int i = 0; i < N; i++)
        CHECK_RC(coc_isend(a, 2, 0, 1, src + i, LEN, &s[i]));
    for (int i = 0; i < 2000 && stats(b).unexpected_messages < N; i++)
        usleep(5000);
    coc_stats sb = stats(b);
    printf("  %d x %d B unexpected: %llu messages, %llu B held (credit %u B)\n", N, LEN,
           (unsigned long long)sb.unexpected_messages, (unsigned long long)sb.unexpected_bytes, CREDIT);
    CHECK(sb.unexpected_messages == N);
    CHECK(sb.unexpected_bytes > 0 && sb.unexpected_bytes <= CREDIT);
    for (int i = 0; i < N; i++) {
        CHECK_RC(coc_irecv(b, 1, 0, 1, dst, LEN, &r));
        coc_status st = t_wait(r);
        CHECK(st.error == 0 && st.count == LEN && memcmp(dst, src + i, LEN) == 0);
        coc_request_free(r);
    }
    for (int i = 0; i < N; i++) {
        CHECK(t_wait(s[i]).error == 0);
        coc_request_free(s[i]);
    }
    /* the credit came back: eager sends complete again before any receive is posted */
    for (int i = 0; i < 8; i++) {
        CHECK_RC(coc_isend(a, 2, 0, 2, src, LEN, &s[i]));
        CHECK(t_wait(s[i]).error == 0);
        coc_request_free(s[i]);
    }
    for (int i = 0; i < 8; i++) {
        CHECK_RC(coc_irecv(b, 1, 0, 2, dst, LEN, &r));
        CHECK(t_wait(r).error == 0 && memcmp(dst, src, LEN) == 0);
        coc_request_free(r);
    }
    free(src);
    free(dst);
}

static void direct(void)
{
    coc_engine *a = t_open(1, 0, 1, EAGER, 0, 0), *b = t_open(2, 0, 1, EAGER, 0, 0);
    t_know(a, 2, b, 0);
    t_know(b, 1, a, 0);
    t_route(a, 2, 2);
    t_route(b, 1, 1);
    flood(a, b);
    coc_engine_close(a);
    coc_engine_close(b);
}

static void through_a_gateway(void)
{
    coc_engine *a = t_open(1, 0, 1, EAGER, 0, 0), *b = t_open(2, 0, 1, EAGER, 0, 0);
    coc_engine *g = t_open(10, COC_ENGINE_FORWARD, 1, 0, 0, 0);
    t_know(a, 10, g, 1);
    t_know(b, 10, g, 1);
    t_know(g, 1, a, 1);
    t_know(g, 2, b, 1);
    t_route(a, 2, 10);
    t_route(b, 1, 10);
    t_route(g, 1, 1);
    t_route(g, 2, 2);
    flood(a, b);
    coc_engine_close(a);
    coc_engine_close(b);
    coc_engine_close(g);
}

/* a believes in a larger eager limit than b: its eager frame is a protocol error at b,
 * logged with a's id, and nothing of it is delivered. */
static void above_the_eager_limit(void)
{
    coc_engine *a = t_open(1, 0, 1, 64u << 10, 0, 0), *b = t_open(2, 0, 1, 4096, 0, 0);
    t_know(a, 2, b, 0);
    t_know(b, 1, a, 0);
    t_route(a, 2, 2);
    t_route(b, 1, 1);
    static uint8_t buf[32768];
    coc_request *s, *r;
    CHECK_RC(coc_irecv(b, 1, 0, 0, buf, sizeof buf, &r));
    CHECK_RC(coc_isend(a, 2, 0, 0, buf, sizeof buf, &s));
    coc_status st = {0};
    CHECK(coc_wait(r, 10 * T_SECOND, &st) == 0 && st.error == COC_EPEERLOST);
    char log[4096];
    CHECK(coc_engine_take_log(b, log, sizeof log) >= 0);
    CHECK(strstr(log, "endpoint 1 sent an eager message of 32768 bytes, above this endpoint's "
                      "eager limit of 4096 bytes") != NULL);
    CHECK(stats(b).protocol_errors == 1);
    coc_request_free(r);
    coc_wait(s, 10 * T_SECOND, NULL);
    coc_request_free(s);
    coc_engine_close(a);
    coc_engine_close(b);
}

int main(void)
{
    direct();
    through_a_gateway();
    above_the_eager_limit();
    CHECK_DONE();
}
