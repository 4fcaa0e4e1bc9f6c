/*
 * coc_enginepong — ping-pong between two endpoints of the coc engine's C API, so that
 * `coc bench engine` can tell the engine's cost from the Python binding's.
 *
 *   coc_enginepong ROLE SELF_ID PEER_ID EAGER FRAGMENT WINDOW SPIN_NS [SIZE:ITERS ...]
 *
 * ROLE is "echo" (send every message back until one with tag 1 arrives) or "client"
 * (time SIZE:ITERS ping-pongs, then stop the echo). EAGER, FRAGMENT, WINDOW and SPIN_NS
 * are engine knobs (0: default). Driven through stdin/stdout lines, so the secret never
 * appears on the command line:
 *   stdin  "SECRET_HEX"                      stdout "address ADDRESS"
 *   stdin  "peer ID ADDRESS..." / "route DEST HOP" (any number), then "go"
 *   stdout (client) "SIZE ITERS MEDIAN_NS P99_NS" per spec, as coc_pingpong prints; then
 *          "done" from both roles.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coc/coc.h"

#define MAX_SIZE (4u << 20)
#define STOP_TAG 1
#define TIMEOUT_NS (60LL * 1000000000LL)

static void fail(const char *what, int rc) {
    fprintf(stderr, "coc_enginepong: %s: %s\n", what, coc_strerror(rc));
    exit(1);
}

static void check(const char *what, int rc) {
    if (rc < 0) fail(what, rc);
}

/* Wait for r, free it, fail on any error; return the message size. */
static uint64_t finish(coc_request *r, const char *what) {
    coc_status st;
    check(what, coc_wait(r, TIMEOUT_NS, &st));
    if (st.error) fail(what, st.error);
    check(what, coc_request_free(r));
    return st.count;
}

static void *page_aligned(size_t n) {
    void *p;
    if (posix_memalign(&p, 4096, n ? n : 1)) {
        fprintf(stderr, "coc_enginepong: out of memory\n");
        exit(1);
    }
    memset(p, 0x5a, n);
    return p;
}

/* now_ns and cmp_u64 are coc_pingpong.c's too, on purpose: each reference program stands
 * alone, one file to read and check (and times the same way). */
static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void echo(coc_engine *e, uint32_t peer) {
    uint8_t *buf = page_aligned(MAX_SIZE);
    for (;;) {
        coc_request *r;
        coc_status st;
        check("irecv", coc_irecv(e, (int32_t)peer, 0, COC_ANY_TAG, buf, MAX_SIZE, &r));
        check("wait", coc_wait(r, TIMEOUT_NS, &st));
        if (st.error) fail("receive", st.error);
        coc_request_free(r);
        if (st.tag == STOP_TAG) return;
        check("isend", coc_isend(e, peer, 0, 0, buf, st.count, &r));
        finish(r, "send");
    }
}

static void client(coc_engine *e, uint32_t peer, int nspecs, char **specs) {
    for (int i = 0; i < nspecs; i++) {
        unsigned long size, iters;
        if (sscanf(specs[i], "%lu:%lu", &size, &iters) != 2 || size > MAX_SIZE || !iters) {
            fprintf(stderr, "coc_enginepong: bad SIZE:ITERS '%s'\n", specs[i]);
            exit(2);
        }
        uint8_t *sbuf = page_aligned(size), *rbuf = page_aligned(size);
        uint64_t *half = malloc(iters * sizeof *half);
        unsigned long warm = iters / 10 + 2;
        for (unsigned long k = 0; k < warm + iters; k++) {
            coc_request *rr, *sr;
            uint64_t t0 = now_ns();
            check("irecv", coc_irecv(e, (int32_t)peer, 0, 0, rbuf, size, &rr));
            check("isend", coc_isend(e, peer, 0, 0, sbuf, size, &sr));
            finish(sr, "send");
            if (finish(rr, "receive") != size) fail("echo size", COC_EPROTO);
            if (k >= warm) half[k - warm] = (now_ns() - t0) / 2;
        }
        qsort(half, iters, sizeof *half, cmp_u64);
        unsigned long p99 = 99 * iters / 100 < iters - 1 ? 99 * iters / 100 : iters - 1;
        printf("%lu %lu %llu %llu\n", size, iters, (unsigned long long)half[iters / 2],
               (unsigned long long)half[p99]);
        fflush(stdout);
        free(half);
        free(sbuf);
        free(rbuf);
    }
    coc_request *r;
    check("isend", coc_isend(e, peer, 0, STOP_TAG, "", 0, &r));
    finish(r, "stop");
}

/* Read "peer"/"route" lines until "go". */
static void configure(coc_engine *e) {
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        unsigned id, hop;
        int at = 0;
        if (strncmp(line, "go", 2) == 0) return;
        if (sscanf(line, "peer %u %n", &id, &at) == 1 && at) {
            line[strcspn(line, "\n")] = 0;
            check("add_peer", coc_engine_add_peer(e, id, line + at));
        } else if (sscanf(line, "route %u %u", &id, &hop) == 2) {
            uint32_t h = hop, w = 1;
            check("set_route", coc_engine_set_route(e, id, &h, &w, 1));
        } else {
            fprintf(stderr, "coc_enginepong: bad line: %s", line);
            exit(2);
        }
    }
    fprintf(stderr, "coc_enginepong: stdin ended before 'go'\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 8 || (strcmp(argv[1], "echo") && strcmp(argv[1], "client"))) {
        fprintf(stderr, "usage: coc_enginepong echo|client SELF_ID PEER_ID EAGER FRAGMENT "
                        "WINDOW SPIN_NS [SIZE:ITERS ...]\n");
        return 2;
    }
    char hex[2 * COC_SECRET_MAX + 2];
    uint8_t secret[COC_SECRET_MAX];
    size_t n = 0;
    if (!fgets(hex, sizeof hex, stdin)) return 2;
    for (; n < COC_SECRET_MAX && sscanf(hex + 2 * n, "%2hhx", &secret[n]) == 1; n++) {}
    coc_engine_config cfg;
    coc_engine_config_init(&cfg);
    cfg.self_id = (uint32_t)atoi(argv[2]);
    cfg.secret = secret;
    cfg.secret_len = n;
    cfg.listen_host = "127.0.0.1";
    cfg.eager_limit = strtoul(argv[4], NULL, 10);
    cfg.fragment_size = strtoul(argv[5], NULL, 10);
    cfg.forward_window = strtoul(argv[6], NULL, 10);
    cfg.spin_ns = atoi(argv[7]);
    coc_engine *e;
    check("open", coc_engine_open(&cfg, &e));
    char address[1024];
    check("address", coc_engine_address(e, address, sizeof address));
    printf("address %s\n", address);
    fflush(stdout);
    configure(e);
    uint32_t peer = (uint32_t)atoi(argv[3]);
    if (argv[1][0] == 'e')
        echo(e, peer);
    else
        client(e, peer, argc - 8, argv + 8);
    printf("done\n");
    fflush(stdout);
    return coc_engine_close(e) < 0;
}
