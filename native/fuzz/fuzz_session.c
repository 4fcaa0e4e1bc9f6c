/*
 * fuzz_session.c — libFuzzer target for a live engine: the input is what a peer sends on
 * one connection. With the first byte odd, the bytes arrive raw (a stranger: the
 * handshake parser sees them); even, the target first completes the handshake as
 * endpoint 7 holding the job's secret, then sends the rest (an authenticated peer: the
 * frame parser, matching, rendezvous handles and gateway paths see them). After each
 * input the engine must close the connection (we shut down our side) within 2 s, and
 * must never crash.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "coc/coc.h"
#include "wire.h"

static const uint8_t secret[] = "fuzzing-secret-0123456789";
static coc_engine *engine;
static char unix_name[108];
static uint8_t rbuf[1 << 16];

static void setup(void)
{
    coc_engine_config cfg;
    coc_engine_config_init(&cfg);
    cfg.self_id = 2;
    cfg.secret = secret;
    cfg.secret_len = sizeof secret - 1;
    cfg.flags = COC_ENGINE_FORWARD;
    cfg.handshake_timeout_ms = 1000;
    if (coc_engine_open(&cfg, &engine) < 0)
        abort();
    char addr[256];
    coc_engine_address(engine, addr, sizeof addr);
    strcpy(unix_name, strstr(addr, "unix:@") + 6);
    uint32_t hop = 7;
    coc_engine_set_route(engine, 7, &hop, NULL, 1); /* replies go back to the fuzzer */
}

static int connect_engine(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(unix_name);
    memcpy(sa.sun_path + 1, unix_name, n);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0)
        abort();
    return fd;
}

static size_t read_some(int fd, uint8_t *buf, size_t n, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    ssize_t k = read(fd, buf, n);
    return k > 0 ? (size_t)k : 0;
}

static int handshake(int fd)
{
    coc__hello me = {.role = COC__ROLE_CONNECTOR, .id = 7, .incarnation = 7}, them;
    uint8_t b[COC__HELLO_LEN], proof[COC__PROOF_LEN];
    memset(me.nonce, 0x11, sizeof me.nonce);
    coc__hello_encode(&me, b);
    if (write(fd, b, sizeof b) != sizeof b)
        return -1;
    size_t got = 0;
    while (got < sizeof b) {
        size_t k = read_some(fd, b + got, sizeof b - got, 2000);
        if (!k)
            return -1;
        got += k;
    }
    if (coc__hello_decode(b, &them, NULL) < 0)
        return -1;
    uint8_t key[COC_KEY_LEN];
    coc_pair_key(secret, sizeof secret - 1, me.id, 0, them.id, 0, key);
    coc__proof(key, sizeof key, COC__ROLE_CONNECTOR, &me, &them, proof);
    return write(fd, proof, sizeof proof) == sizeof proof ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!engine)
        setup();
    if (size == 0)
        return 0;
    int fd = connect_engine();
    int raw = data[0] & 1;
    if (!raw && handshake(fd) < 0)
        abort();
    /* the engine may answer (CTS, errors): keep its socket drained while we write */
    for (size_t off = 1; off < size;) {
        ssize_t k = send(fd, data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0)
            off += (size_t)k;
        else if (k < 0 && errno != EAGAIN)
            break; /* the engine already dropped us */
        read_some(fd, rbuf, sizeof rbuf, 0);
    }
    shutdown(fd, SHUT_WR);
    for (int waited = 0;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
            if (read(fd, rbuf, sizeof rbuf) <= 0)
                break; /* closed by the engine: done with this input */
        } else if ((waited += 100) >= 2000) {
            abort(); /* the engine kept a half-closed connection: a hang */
        }
    }
    close(fd);
    char log[4096];
    coc_engine_take_log(engine, log, sizeof log);
    /* delivered messages wait unreceived; a fresh engine now and then keeps memory flat */
    static unsigned inputs;
    if (++inputs % 256 == 0) {
        coc_engine_close(engine);
        engine = NULL;
    }
    return 0;
}
