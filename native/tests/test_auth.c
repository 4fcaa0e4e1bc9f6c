/* test_auth.c — strangers: a wrong secret, a non-coc client, a silent client, and an
 * authenticated peer that then sends garbage; then identity: a frame with another
 * endpoint's source, a second connection claiming a connected id, an engine holding only
 * its issued keys. Each is dropped, counted and logged, and nothing it sent is delivered. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engines.h"
#include "wire.h"

static int raw_connect(coc_engine *e)
{
    char addr[256];
    coc_engine_address(e, addr, sizeof addr);
    int port = atoi(strrchr(strtok(addr, " "), ':') + 1);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    return fd;
}

/* A bound against hangs, not a speed check: a loaded machine (CI) may take seconds for
 * what takes milliseconds when it is quiet. */
#define HANG_BOUND_S 20

/* Read exactly n bytes; returns bytes read (less at EOF, or when HANG_BOUND_S pass with
 * nothing to read). *eof (when given) is set when the peer closed its end. */
static size_t read_upto(int fd, uint8_t *buf, size_t n, int *eof)
{
    size_t got = 0;
    if (eof)
        *eof = 0;
    while (got < n) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, HANG_BOUND_S * 1000) <= 0)
            break;
        ssize_t k = read(fd, buf + got, n - got);
        if (k <= 0) {
            if (eof)
                *eof = k == 0;
            break;
        }
        got += (size_t)k;
    }
    return got;
}

static size_t read_n(int fd, uint8_t *buf, size_t n)
{
    return read_upto(fd, buf, n, NULL);
}

/* 1 when the engine closes fd's connection (end of stream) with nothing more to read. */
static int closed_by_engine(int fd)
{
    uint8_t junk[256];
    int eof;
    return read_upto(fd, junk, sizeof junk, &eof) == 0 && eof;
}

/* Wait (HANG_BOUND_S at most) until the counter at field_offset reaches want; its value. */
static uint64_t stat_wait(coc_engine *e, size_t field_offset, uint64_t want)
{
    coc_stats st;
    uint64_t v = 0;
    double deadline = t_now() + HANG_BOUND_S;
    for (;;) {
        coc_engine_stats(e, &st);
        memcpy(&v, (char *)&st + field_offset, sizeof v);
        if (v >= want || t_now() > deadline)
            break;
        usleep(10000);
    }
    return v;
}

static int log_has(coc_engine *e, const char *what)
{
    char log[8192];
    coc_engine_take_log(e, log, sizeof log);
    return strstr(log, what) != NULL;
}

/* Do the handshake by hand as endpoint `id` with the key of (id, 2) derived from `secret`;
 * returns the socket. */
static int raw_peer(coc_engine *e, uint32_t id, const uint8_t *secret, size_t slen)
{
    uint8_t key[COC_KEY_LEN];
    CHECK_RC(coc_pair_key(secret, slen, id, 0, 2, 0, key));
    int fd = raw_connect(e);
    coc__hello me = {.role = COC__ROLE_CONNECTOR, .id = id}, them;
    getrandom(me.nonce, sizeof me.nonce, 0);
    getrandom(&me.incarnation, sizeof me.incarnation, 0);
    me.incarnation |= 1; /* another process each time: never 0, as in an engine */
    uint8_t b[COC__HELLO_LEN], proof[COC__PROOF_LEN];
    coc__hello_encode(&me, b);
    CHECK(write(fd, b, sizeof b) == sizeof b);
    CHECK(read_n(fd, b, sizeof b) == sizeof b);
    CHECK(coc__hello_decode(b, &them, NULL) == 0 && them.id == 2);
    coc__proof(key, sizeof key, COC__ROLE_CONNECTOR, &me, &them, proof);
    CHECK(write(fd, proof, sizeof proof) == sizeof proof);
    CHECK(read_n(fd, proof, sizeof proof) == sizeof proof);
    return fd;
}

static void send_frame(int fd, const coc__hdr *h, const void *payload)
{
    uint8_t b[COC__HDR_LEN];
    coc__hdr_encode(h, b);
    CHECK(write(fd, b, sizeof b) == sizeof b);
    if (h->len)
        CHECK(write(fd, payload, h->len) == (ssize_t)h->len);
}

/* Open an engine from cfg (listening on loopback) that routes to b (endpoint 2) directly. */
static coc_engine *open_towards(coc_engine_config *cfg, coc_engine *b)
{
    coc_engine *e = NULL;
    cfg->listen_host = "127.0.0.1";
    CHECK_RC(coc_engine_open(cfg, &e));
    t_know(e, 2, b, 1);
    t_route(e, 2, 2);
    return e;
}

/* Endpoint 9 sends text (5 bytes, tag 4) on fd; b must deliver it. */
static void heard(coc_engine *b, int fd, const char *text)
{
    coc__hdr h = {.type = COC__EAGER, .source = 9, .dest = 2, .tag = 4, .len = 5, .total = 5};
    char in[8] = {0};
    coc_request *r;
    send_frame(fd, &h, text);
    CHECK_RC(coc_irecv(b, 9, 0, 4, in, sizeof in, &r));
    coc_status st = t_wait(r);
    CHECK(st.error == 0 && st.count == 5 && memcmp(in, text, 5) == 0);
    coc_request_free(r);
}

int main(void)
{
    t_handshake_ms = 2000;
    coc_engine *b = t_open(2, 0, 1, 0, 0, 0);
    coc_status st;

    /* 1. an engine holding another secret */
    coc_engine_config cfg;
    coc_engine_config_init(&cfg);
    cfg.self_id = 3;
    cfg.secret = (const uint8_t *)"another-secret-of-16+bytes";
    cfg.secret_len = 26;
    coc_engine *x = open_towards(&cfg, b);
    coc_request *s1, *s2;
    static uint8_t big[1 << 20];
    CHECK_RC(coc_isend(x, 2, 0, 1, "secret data", 12, &s1));
    CHECK_RC(coc_isend(x, 2, 0, 1, big, sizeof big, &s2));
    CHECK(stat_wait(b, offsetof(coc_stats, auth_failures), 1) >= 1);
    CHECK(coc_wait(s2, 5 * T_SECOND, &st) == 0 && st.error == COC_EAUTH);  /* not a lost peer */
    CHECK(coc_iprobe(b, COC_ANY_SOURCE, 0, COC_ANY_TAG, &st) == 0);
    CHECK(log_has(b, "failed authentication"));
    coc_request_free(s1);
    coc_request_free(s2);
    coc_engine_close(x);

    /* 2. not a coc peer at all */
    int fd = raw_connect(b);
    const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n........................";
    CHECK(write(fd, http, 48) == 48);
    CHECK(stat_wait(b, offsetof(coc_stats, auth_failures), 2) >= 2);
    uint8_t junk[256];
    CHECK(read_n(fd, junk, sizeof junk) == COC__HELLO_LEN); /* its hello, then EOF */
    close(fd);
    CHECK(log_has(b, "bad preamble magic"));

    /* 3. a silent stranger is dropped at the handshake deadline (2 s in these tests): not
     * before it, and well before the engine's default of 10 s (however late a loaded
     * machine runs the engine's timer, it runs it far sooner than that) */
    double t0 = t_now();
    fd = raw_connect(b);
    CHECK(read_n(fd, junk, sizeof junk) == COC__HELLO_LEN);
    CHECK(closed_by_engine(fd));
    double dropped = t_now() - t0;
    CHECK(dropped > 1.5 && dropped < 9.0);
    close(fd);
    CHECK(log_has(b, "did not finish the handshake"));

    /* 4. the right secret but a forged proof for another id... */
    fd = raw_peer(b, 9, (const uint8_t *)"0123456789abcdef-wrong-secret", 29);
    CHECK(stat_wait(b, offsetof(coc_stats, auth_failures), 3) >= 3);
    close(fd);

    /* 5. a well-behaved raw peer is heard, then garbage gets it dropped */
    fd = raw_peer(b, 9, t_secret, sizeof t_secret - 1);
    heard(b, fd, "hello");
    uint8_t garbage[COC__HDR_LEN];
    memset(garbage, 0x5a, sizeof garbage);
    CHECK(write(fd, garbage, sizeof garbage) == sizeof garbage);
    CHECK(stat_wait(b, offsetof(coc_stats, protocol_errors), 1) == 1);
    CHECK(closed_by_engine(fd));
    close(fd);
    CHECK(log_has(b, "endpoint 9"));

    /* 6. a frame for someone else sent to an engine that does not forward */
    fd = raw_peer(b, 9, t_secret, sizeof t_secret - 1);
    coc__hdr h = {.type = COC__EAGER, .source = 9, .dest = 77, .tag = 4, .len = 5, .total = 5};
    send_frame(fd, &h, "hello");
    CHECK(stat_wait(b, offsetof(coc_stats, protocol_errors), 2) == 2);
    close(fd);
    CHECK(log_has(b, "does not forward"));

    /* 7. a data fragment for a receive that does not exist */
    fd = raw_peer(b, 9, t_secret, sizeof t_secret - 1);
    h = (coc__hdr){.type = COC__DATA, .source = 9, .dest = 2, .len = 5, .total = 5, .rcookie = 12345};
    send_frame(fd, &h, "hello");
    CHECK(stat_wait(b, offsetof(coc_stats, protocol_errors), 3) == 3);
    close(fd);

    /* 8. an authenticated endpoint writing another endpoint's id as the source */
    fd = raw_peer(b, 9, t_secret, sizeof t_secret - 1);
    h = (coc__hdr){.type = COC__EAGER, .source = 5, .dest = 2, .tag = 4, .len = 5, .total = 5};
    send_frame(fd, &h, "forge");
    CHECK(stat_wait(b, offsetof(coc_stats, protocol_errors), 4) == 4);
    CHECK(closed_by_engine(fd));
    close(fd);
    CHECK(log_has(b, "sent a frame with source endpoint 5"));

    /* 9. a second connection claiming endpoint 9 while 9 is connected: refused, 9 still
     * heard; once 9 has closed, a new connection for it is accepted */
    fd = raw_peer(b, 9, t_secret, sizeof t_secret - 1);
    int twin = raw_peer(b, 9, t_secret, sizeof t_secret - 1);
    CHECK(closed_by_engine(twin));
    close(twin);
    CHECK(stat_wait(b, offsetof(coc_stats, duplicate_ids), 1) == 1);
    CHECK(log_has(b, "endpoint 9 is connected already"));
    heard(b, fd, "still");
    close(fd);
    /* a new connection for 9 is accepted only once b has seen the old one's end of stream */
    double deadline = t_now() + HANG_BOUND_S;
    while (coc_engine_peer_connected(b, 9) == 1 && t_now() < deadline)
        usleep(1000);
    CHECK(coc_engine_peer_connected(b, 9) == 0);
    fd = raw_peer(b, 9, t_secret, sizeof t_secret - 1);
    heard(b, fd, "again");
    close(fd);
    CHECK(stat_wait(b, offsetof(coc_stats, duplicate_ids), 1) == 1);

    /* 10. an engine holding only its issued keys (no secret) talks to its peer 2, and
     * refuses an id it holds no key for, even from a holder of the job's secret */
    coc_peer_key issued = {.id = 2};
    CHECK_RC(coc_pair_key(t_secret, sizeof t_secret - 1, 4, 0, 2, 0, issued.key));
    coc_engine_config_init(&cfg);
    cfg.self_id = 4;
    cfg.keys = &issued;
    cfg.nkeys = 1;
    coc_engine *k = open_towards(&cfg, b);
    char in[8] = {0};
    coc_request *r;
    CHECK_RC(coc_isend(k, 2, 0, 6, "keyed", 6, &s1));
    CHECK_RC(coc_irecv(b, 4, 0, 6, in, sizeof in, &r));
    st = t_wait(r);
    CHECK(st.error == 0 && memcmp(in, "keyed", 6) == 0);
    CHECK(t_wait(s1).error == 0);
    coc_request_free(r);
    coc_request_free(s1);
    uint64_t before = stat_wait(k, offsetof(coc_stats, auth_failures), 0);
    fd = raw_connect(k);
    coc__hello claim = {.role = COC__ROLE_CONNECTOR, .id = 9, .incarnation = 9};
    uint8_t hb[COC__HELLO_LEN];
    coc__hello_encode(&claim, hb);
    CHECK(write(fd, hb, sizeof hb) == sizeof hb);
    CHECK(read_n(fd, junk, sizeof junk) == COC__HELLO_LEN); /* its hello, no proof, EOF */
    close(fd);
    CHECK(stat_wait(k, offsetof(coc_stats, auth_failures), before + 1) == before + 1);
    CHECK(log_has(k, "holds no key for"));
    coc_engine_close(k);

    /* 11. a secret and a key table at once, or neither, is refused */
    cfg.secret = t_secret;
    cfg.secret_len = sizeof t_secret - 1;
    CHECK(coc_engine_open(&cfg, &k) == COC_EINVAL);
    cfg.secret = NULL;
    cfg.secret_len = 0;
    cfg.nkeys = 0;
    cfg.keys = NULL;
    CHECK_RC(coc_engine_open(&cfg, &k)); /* an empty table: an endpoint with no peers */
    coc_engine_close(k);
    cfg.secret_len = 16;
    CHECK(coc_engine_open(&cfg, &k) == COC_EINVAL);

    CHECK(coc_iprobe(b, COC_ANY_SOURCE, 0, COC_ANY_TAG, &st) == 0);
    coc_engine_close(b);
    CHECK_DONE();
}
