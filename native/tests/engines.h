/* engines.h — helpers for tests that run several engines in one process. */
#ifndef COC_TEST_ENGINES_H
#define COC_TEST_ENGINES_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "coc/coc.h"

#define T_SECOND 1000000000LL
static const uint8_t t_secret[] = "0123456789abcdef-test-secret";
static uint32_t t_handshake_ms; /* 0: the engine's default */
static int32_t t_liveness_ms;   /* 0: the engine's default */
static uint32_t t_shm_flags;    /* added to every engine's flags: COC_ENGINE_SHM / _NO_SHM */
static size_t t_shm_ring;       /* ring bytes per direction; 0: the engine's default */

/* Open an engine with id `id`; listen on TCP loopback when tcp is set. */
static inline coc_engine *t_open(uint32_t id, uint32_t flags, int tcp, size_t eager, size_t fragment,
                          size_t window)
{
    coc_engine_config cfg;
    coc_engine *e = NULL;
    coc_engine_config_init(&cfg);
    cfg.self_id = id;
    cfg.secret = t_secret;
    cfg.secret_len = sizeof t_secret - 1;
    cfg.listen_host = tcp ? "127.0.0.1" : NULL;
    cfg.flags = flags | t_shm_flags;
    cfg.shm_ring = t_shm_ring;
    cfg.eager_limit = eager;
    cfg.fragment_size = fragment;
    cfg.forward_window = window;
    cfg.handshake_timeout_ms = t_handshake_ms;
    cfg.liveness_ms = t_liveness_ms;
    int rc = coc_engine_open(&cfg, &e);
    if (rc < 0) {
        fprintf(stderr, "coc_engine_open(%u): %s\n", id, coc_strerror(rc));
        exit(EXIT_FAILURE);
    }
    return e;
}

/* Tell `a` where `b` is (address only; routes are separate). */
static inline void t_know(coc_engine *a, uint32_t b_id, coc_engine *b, int tcp_only)
{
    char addr[256];
    CHECK_RC(coc_engine_address(b, addr, sizeof addr));
    if (tcp_only) {
        char *sp = strchr(addr, ' ');
        if (sp)
            *sp = '\0';
    }
    CHECK_RC(coc_engine_add_peer(a, b_id, addr));
}

/* Route a -> dest through one hop. */
static inline void t_route(coc_engine *a, uint32_t dest, uint32_t hop)
{
    CHECK_RC(coc_engine_set_route(a, dest, &hop, NULL, 1));
}

/* Wait up to 10 s; CHECK that it completed. */
static inline coc_status t_wait(coc_request *r)
{
    coc_status st = {0};
    int rc = coc_wait(r, 10 * T_SECOND, &st);
    if (rc < 0) {
        fprintf(stderr, "wait: %s\n", coc_strerror(rc));
        check_failures++;
        st.error = rc;
    }
    return st;
}

static inline double t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
