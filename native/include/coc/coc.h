/*
 * coc.h — the one public header of coc's native engine.
 *
 * The engine is plain C11 with no Python in it. Handles are opaque; every function returns
 * an int that is >= 0 on success (or a count) and a negative code on failure: -errno for an
 * operating-system failure, or one of coc's own codes from the reserved range below.
 * coc_strerror() turns either kind into text. The library never prints and never exits.
 */
#ifndef COC_COC_H
#define COC_COC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COC_VERSION_MAJOR 0
#define COC_VERSION_MINOR 1
#define COC_VERSION_PATCH 0

/* coc's own error codes live in [-11999, -11000], far from any errno value. */
#define COC_ERR_BASE (-11000)
enum coc_error {
    COC_EPROTO = COC_ERR_BASE - 1,     /* a peer sent bytes that break the wire protocol */
    COC_EAUTH = COC_ERR_BASE - 2,      /* a peer failed to prove the key of the id it claims */
    COC_ETRUNC = COC_ERR_BASE - 3,     /* an incoming message is larger than the receive buffer */
    COC_EPEERLOST = COC_ERR_BASE - 4,  /* a peer closed or died while traffic was pending */
    COC_ENOROUTE = COC_ERR_BASE - 5,   /* the route table has no way to the destination */
    COC_ECLOSED = COC_ERR_BASE - 6,    /* the handle was closed while the operation waited */
    COC_ETIMEDOUT = COC_ERR_BASE - 7,  /* a wait ran past its deadline */
    COC_EINVAL = COC_ERR_BASE - 8,     /* an argument is out of its documented range */
    COC_ECANCELED = COC_ERR_BASE - 9,  /* the operation was cancelled */
    COC_ERR_LAST = COC_ERR_BASE - 10
};

/* The version as "MAJOR.MINOR.PATCH". Static storage; thread-safe. */
const char *coc_version(void);

/* Text for a return code (negative errno or a coc code). Static storage; thread-safe. */
const char *coc_strerror(int rc);

/* 1 if rc is one of coc's own codes (not an errno value), else 0. */
int coc_is_coc_error(int rc);

/*
 * Run the engine's built-in self-test: checks the pieces that need no peer (libcrypto's
 * SHA-256 and HMAC known answers, the frame header codec, the error table). Returns 0 when all pass,
 * else the negative code of the first failure (COC_EPROTO for the hash or codec).
 * Blocking, thread-safe, allocates nothing that outlives the call.
 */
int coc_selftest(void);

/* ------------------------------------------------------------------------------------------
 * Engine: one per process. It owns a progress thread (epoll) that moves bytes while the
 * caller computes; callers post operations and wait or test on requests.
 *
 * Endpoints. Every process of a job (rank or gateway daemon) has a 32-bit endpoint id,
 * unique in the job. The engine knows nothing of ranks, sites or hosts: the caller maps
 * those onto ids and tells the engine, per destination id, which next hop(s) to use.
 *
 * Threads. All functions may be called from any thread unless noted. A request belongs to
 * the engine that made it and must be freed before the engine is closed or by close itself.
 * ------------------------------------------------------------------------------------------ */

typedef struct coc_engine coc_engine;   /* opaque */
typedef struct coc_request coc_request; /* opaque */

#define COC_ANY_SOURCE (-1)
#define COC_ANY_TAG (-1)
#define COC_MAX_TAG 0x7fffffff
#define COC_SECRET_MIN 16   /* bytes; a shorter secret is COC_EINVAL */
#define COC_SECRET_MAX 64

/*
 * Endpoint identity (added after 0.1.0; docs/security.md). Every connection proves the key
 * its two endpoints share,
 *   K(a, b) = HMAC-SHA256(job secret, "coc-pair-1" || lo || kind(lo) || hi || kind(hi))
 * with lo < hi the two endpoint ids (32-bit little-endian) and kind 1 for a gateway, 0 for
 * any other endpoint. An engine opened with the job's secret (a trusted daemon: gateways)
 * derives every pair's key itself. An engine opened with a key table instead (a rank)
 * holds K(self, peer) for the peers it may talk to directly, nothing else: it can prove no
 * id but its own, and cannot pass for a gateway.
 */
#define COC_KEY_LEN 32
#define COC_PEER_GATEWAY 0x1 /* coc_peer_key.flags: the peer is a gateway (forwards frames) */

typedef struct coc_peer_key {
    uint32_t id;              /* the peer's endpoint id */
    uint32_t flags;           /* COC_PEER_GATEWAY or 0: what the peer was issued as */
    uint8_t key[COC_KEY_LEN]; /* K(self, id), from coc_pair_key() */
} coc_peer_key;

/*
 * Compute K(a, b) into out (a_flags, b_flags: COC_PEER_GATEWAY or 0). The launcher calls it
 * to issue key tables; the result does not depend on the order of a and b. COC_EINVAL for
 * a secret outside COC_SECRET_MIN..MAX bytes or unknown flags. Thread-safe.
 */
int coc_pair_key(const uint8_t *secret, size_t secret_len, uint32_t a, uint32_t a_flags,
                 uint32_t b, uint32_t b_flags, uint8_t out[COC_KEY_LEN]);

/* Engine flags (coc_engine_config.flags). */
#define COC_ENGINE_FORWARD 0x1 /* forward frames addressed to other endpoints (gateway) */
/* Same-host peers (unix-socket addresses) talk through shared-memory rings set up over the
 * authenticated socket, by default; shm_ring (below) sets the ring size per direction. A
 * gateway never offers shared memory (it accepts an endpoint's offer). The library reads
 * no environment: the Python binding maps COC_SHM=0/1 onto these flags and COC_SHM_RING
 * onto shm_ring. */
#define COC_ENGINE_SHM 0x2     /* use shared memory with same-host peers (the default) */
#define COC_ENGINE_NO_SHM 0x4  /* never: the unix socket only */
/* Waits always spin first (up to the adaptive budget): without it each engine spins or
 * blocks at once, whichever made its waits end sooner lately (docs/engine.md, "Waiting").
 * The binding maps COC_SPIN_LOAD=ignore onto it. */
#define COC_ENGINE_SPIN_ANY_LOAD 0x8

typedef struct coc_engine_config {
    uint32_t self_id;            /* this endpoint's id */
    const uint8_t *secret;       /* the job's secret; copied; COC_SECRET_MIN..MAX bytes */
    size_t secret_len;
    const char *listen_host;     /* IP to listen on ("127.0.0.1", "0.0.0.0"); NULL: no TCP listener */
    uint16_t port_min, port_max; /* listening port range, inclusive; 0,0: any free port */
    size_t eager_limit;          /* largest message sent eagerly; 0: engine default */
    size_t fragment_size;        /* largest frame payload; 0: engine default */
    size_t forward_window;       /* bytes buffered per forwarded connection; 0: default */
    uint32_t flags;              /* COC_ENGINE_* */
    /* -- added after 0.1.0 (append only) -- */
    uint32_t handshake_timeout_ms; /* a connection not authenticated by then is dropped; 0: 10 s */
    int32_t spin_ns;             /* coc_wait/coc_probe poll at most this long before
                                    sleeping (docs/engine.md, "Waiting"); 0: default
                                    (200 us), negative: never spin (the binding lets
                                    COC_SPIN_NS override it) */
    /* -- added after 0.1.0: endpoint identity (append only) -- */
    const coc_peer_key *keys;    /* instead of a secret (secret NULL, secret_len 0): the
                                    peers this endpoint may talk to directly and the key it
                                    shares with each; copied. Must be NULL with a secret */
    size_t nkeys;
    /* -- added after 0.1.0: failover (append only) -- */
    int32_t liveness_ms;         /* a connection silent this long is dead (quiet ones get
                                    PING frames); 0: 5000; negative: never (the binding
                                    fills it from COC_LIVENESS_MS when not given) */
    /* -- added in session 5: knobs that were environment variables (append only) -- */
    size_t shm_ring;             /* shared-memory ring bytes per direction offered to
                                    same-host peers: a power of two, 4 KiB..64 MiB; 0: 1 MiB
                                    (the binding fills it from COC_SHM_RING) */
    /* -- added in session 5: send coalescing (append only) -- */
    int32_t send_hold_ns;        /* an endpoint's frame posted within this long of the one
                                    before it on the same socket waits for the frames after
                                    it and leaves with them in one write, once the caller
                                    waits, tests or looks, or posts again this long after
                                    the first, or at the latest 4 x this long after it
                                    (docs/engine.md, "Send coalescing"); 0: 50 us;
                                    negative: never (the binding fills it from
                                    COC_SEND_HOLD_NS). Gateways and shared memory never
                                    hold */
} coc_engine_config;

/* Zero a config and fill in defaults (no listener, engine defaults). */
void coc_engine_config_init(coc_engine_config *cfg);

/*
 * Create an engine and start its progress thread. Exactly one of a secret and a key table
 * is given (COC_EINVAL otherwise). On success *out owns the engine; the
 * caller must coc_engine_close() it. Does not block on the network.
 */
int coc_engine_open(const coc_engine_config *cfg, coc_engine **out);

/*
 * Stop the progress thread, close every connection and free the engine. Pending requests
 * complete with COC_ECLOSED before it returns; requests not yet freed are freed. Idempotent
 * on NULL. Must not be called from two threads at once. Blocks until the thread joined.
 */
int coc_engine_close(coc_engine *e);

/*
 * Write the engine's contact addresses as one NUL-terminated string into buf (space
 * separated, e.g. "tcp://127.0.0.1:40123 unix:@coc/ea13a3f2.4026531833/4242.0"). The
 * caller hands it to peers via coc_engine_add_peer(). Returns the string length, or
 * -ENOSPC if buf is too small. The TCP entry names listen_host as given (IPv4 only): with
 * a wildcard ("0.0.0.0") peers on other hosts need a concrete address instead. The unix
 * entry is used only by peers on the same host and network namespace
 * (docs/wire-protocol.md).
 */
int coc_engine_address(coc_engine *e, char *buf, size_t len);

/*
 * Tell the engine how to reach endpoint `id` (an address string from that endpoint's
 * coc_engine_address()). Replaces an earlier entry. The engine connects only when traffic
 * needs it, and only to ids that appear as a next hop in the route table.
 */
int coc_engine_add_peer(coc_engine *e, uint32_t id, const char *address);

/*
 * Set the route to endpoint `dest`: n next hops with relative weights (n >= 1). A hop equal
 * to `dest` means "directly". Several hops share load in proportion to their weights while
 * keeping every (source, destination, context) stream in order (see the size classes
 * below: envelopes take one hop per pair, bulk bytes are striped over all hops).
 * Replaces an earlier route, for both size classes.
 * Sending to an id with no route fails with COC_ENOROUTE: the engine never connects to a
 * host the route table does not name (reachability enforcement).
 */
int coc_engine_set_route(coc_engine *e, uint32_t dest, const uint32_t *hops,
                         const uint32_t *weights, size_t n);

/*
 * Routes by message size class (added after 0.1.0). A frame's size class is LARGE for the
 * DATA frames of a rendezvous transfer (the bytes of a message above eager_limit) and
 * SMALL for everything else: eager messages, the envelopes and replies of rendezvous
 * (RTS, CTS), error reports and closes. Every engine, rank or gateway, applies the rule.
 *   SMALL frames of one (source, destination) pair always take one hop of the small
 *   route (chosen by hash), so envelopes are matched in sending order.
 *   LARGE frames are placed by (receive handle, offset): they are striped fragment by
 *   fragment over all hops of the large route in proportion to the weights.
 * So MPI's non-overtaking order holds across classes: a message's envelope always travels
 * the small route, only its bytes may take another.
 * coc_engine_set_route_class sets one class's route to `dest` (same arguments as
 * coc_engine_set_route, which sets both). The first route set for a destination applies
 * to both classes until the other one is set. COC_EINVAL for another size_class.
 */
#define COC_CLASS_SMALL 0
#define COC_CLASS_LARGE 1
int coc_engine_set_route_class(coc_engine *e, uint32_t dest, int size_class,
                               const uint32_t *hops, const uint32_t *weights, size_t n);

/*
 * Connect to next hop `hop` now rather than when traffic first needs it (added after
 * 0.1.0). Failure detection needs a connection: an endpoint that never sent anything has
 * none, so its death goes unnoticed. Connecting each endpoint to its gateway(s) at start
 * lets a gateway see it die and tell every endpoint (ERROR frames, docs/wire-protocol.md).
 * `hop` must be a next hop of some route (COC_ENOROUTE otherwise, as for sends); returns
 * -errno if connecting fails at once. Does not wait for the handshake.
 */
int coc_engine_connect(coc_engine *e, uint32_t hop);

/*
 * Emulate latency in user space: delay every frame sent to peer `id` by delay_ns (0 turns
 * it off). For testbeds on kernels without netem; not meant for production use.
 */
int coc_engine_set_peer_delay(coc_engine *e, uint32_t id, uint64_t delay_ns);

/*
 * A file descriptor that becomes readable when a request completes (or a peer is lost), for
 * asyncio's add_reader. Owned by the engine. Call coc_engine_drain_fd() when it fires, then
 * test the requests you are waiting for.
 */
int coc_engine_fd(coc_engine *e);
int coc_engine_drain_fd(coc_engine *e);

/* ---- point to point ---------------------------------------------------------------------- */

typedef struct coc_status {
    int32_t source;   /* sending endpoint id */
    int32_t tag;
    uint32_t context;
    uint64_t count;   /* bytes of the message (the full incoming size, also on truncation) */
    int error;        /* 0, COC_ETRUNC, COC_EPEERLOST, COC_ECLOSED, COC_ECANCELED, COC_EPROTO */
} coc_status;

/*
 * Start sending len bytes of buf to endpoint dest. buf must stay valid and unchanged until
 * the request completes (small messages may be copied at once; large ones are read in
 * place). *out must be freed with coc_request_free() after completion.
 * A message up to eager_limit completes at once when it is written or copied; copies are
 * bounded per connection (4 MiB), so while a receiver does not keep up, further small
 * sends stay pending until their bytes are written (the sender's memory stays bounded).
 * Sends on a connection still being set up also wait to be written, so a connection that
 * cannot be made fails them (COC_EPEERLOST) instead of losing them.
 * Returns COC_ENOROUTE without a route (or without an address for its next hop), or
 * -errno when connecting to the next hop fails at once (e.g. -ECONNREFUSED on a unix
 * socket); a connection that fails later completes the request with COC_EPEERLOST.
 */
int coc_isend(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag, const void *buf,
              size_t len, coc_request **out);

/*
 * coc_isend for a blocking send: when the send completes at once without error (written,
 * copied or delivered to this endpoint), its request is released here and *out is NULL;
 * otherwise *out is the pending request, as coc_isend gives it. Either way the sends held
 * for coalescing leave, as coc_wait's look (timeout 0) lets them. What a coc_isend, a
 * coc_wait with timeout 0 and a coc_request_free do for such a send, under one lock.
 */
int coc_isend_or_done(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag,
                      const void *buf, size_t len, coc_request **out);

/*
 * Post a receive for a message matching (source or COC_ANY_SOURCE, context, tag or
 * COC_ANY_TAG) into buf of capacity cap. Matching follows MPI: posted receives are matched
 * in posting order; messages from one source in one context are matched in sending order.
 * A larger message completes the request with status.error = COC_ETRUNC and status.count =
 * its full size (the first cap bytes are delivered).
 */
int coc_irecv(coc_engine *e, int32_t source, uint32_t context, int32_t tag, void *buf,
              size_t cap, coc_request **out);

/*
 * Wait until r completes or timeout_ns passes (negative: no limit). Returns 0 and fills
 * *st (if not NULL) when complete, COC_ETIMEDOUT when not complete yet (r stays valid).
 * Spins briefly, then sleeps. Releases no locks the caller holds; safe without the GIL.
 * The operation's own error (truncation, lost peer, ...) is in st->error, not the return.
 */
int coc_wait(coc_request *r, int64_t timeout_ns, coc_status *st);

/* 1 and *st filled if r completed, 0 if not yet. Never blocks. */
int coc_test(coc_request *r, coc_status *st);

/*
 * Cancel a receive that has not matched yet (completes with COC_ECANCELED) and return 0;
 * return COC_EINVAL when it already matched or is a send (which then completes normally).
 */
int coc_cancel(coc_request *r);

/* Free a completed or cancelled request. Freeing a pending request cancels it first and
 * is an error (COC_EINVAL) for a send still in flight. */
int coc_request_free(coc_request *r);

/*
 * Check for a matching message that has arrived (or been announced, for rendezvous) and not
 * been received. Returns 1 and fills *st with its source, tag and full size, or 0.
 */
int coc_iprobe(coc_engine *e, int32_t source, uint32_t context, int32_t tag, coc_status *st);

/* Like coc_iprobe but waits up to timeout_ns (negative: no limit); COC_ETIMEDOUT if none. */
int coc_probe(coc_engine *e, int32_t source, uint32_t context, int32_t tag, int64_t timeout_ns,
              coc_status *st);

/* ---- receives of unknown size, gather-sends (added after 0.1.0) --------------------------- */

/*
 * Post a receive like coc_irecv, but without a buffer: when it matches, the engine
 * allocates one of the message's exact size (64-byte aligned). A message above max bytes
 * completes with COC_ETRUNC, status.count its full size, and its first max bytes. An eager
 * message that waited in the unexpected queue is handed over as it is, without a copy
 * (64-byte aligned from 1 KiB on; a smaller one 16-byte aligned, as malloc's).
 * Matching, ordering, cancel and failures are those of coc_irecv. After completion,
 * coc_request_take_buffer() hands the buffer to the caller; one not taken is freed with
 * the request. Lets a layer above receive a message of unknown size in one step, without
 * a probe-then-receive race and without a second framing of its own.
 */
int coc_irecv_alloc(coc_engine *e, int32_t source, uint32_t context, int32_t tag, size_t max,
                    coc_request **out);

/*
 * Take the buffer of a completed coc_irecv_alloc receive: returns it and its length in
 * *len (the bytes delivered), or NULL (*len 0) for another request, a pending one, a
 * buffer already taken or a message of 0 bytes. The caller frees it with coc_buffer_free().
 */
void *coc_request_take_buffer(coc_request *r, size_t *len);
void coc_buffer_free(void *buf);

/* One buffer of a gather-send. */
typedef struct coc_iovec {
    const void *base;
    size_t len;
} coc_iovec;

#define COC_IOV_MAX 1024

/*
 * Gather-send: send the n buffers iov[0..n) (n <= COC_IOV_MAX) as ONE message holding their
 * bytes in order, as coc_isend sends one buffer; the receiver sees a single message of the
 * summed size. The iov array is copied; the buffers must stay valid and unchanged until
 * the request completes. A message up to eager_limit (or one to this endpoint itself) is
 * joined into one copy owned by the request; a larger one is streamed from the buffers
 * themselves, a DATA frame never spanning two of them.
 */
int coc_isendv(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag, const coc_iovec *iov,
               size_t n, coc_request **out);

/* ---- observation ------------------------------------------------------------------------- */

typedef struct coc_stats {
    uint64_t frames_sent, frames_received, frames_forwarded;
    uint64_t bytes_sent, bytes_received, bytes_forwarded;
    uint64_t connections_open;      /* now */
    uint64_t auth_failures;         /* peers dropped for failing the handshake */
    uint64_t protocol_errors;       /* peers dropped for malformed frames */
    uint64_t peers_lost;
    uint64_t unexpected_messages;   /* now queued */
    uint64_t unexpected_bytes;      /* now buffered for eager unexpected messages */
    uint64_t forward_bytes_buffered;      /* now, all forwarded connections together */
    uint64_t forward_bytes_buffered_max;  /* high-water mark since open */
    /* -- added after 0.1.0 (append only) -- */
    uint64_t duplicate_ids;         /* connections refused: their endpoint id was connected */
    /* -- added in session 4 (append only): how waits (coc_wait) ended, docs/engine.md -- */
    uint64_t waits_at_once;         /* the request was complete when the wait began */
    uint64_t waits_spun;            /* completed while the waiter spun */
    uint64_t waits_polled;          /* completed while the waiter blocked in the poller */
    uint64_t waits_slept;           /* completed while the waiter slept on its futex */
    uint64_t spin_ns;               /* time waiters spent spinning, all waits together */
    uint64_t spin_budget_ns;        /* the adaptive spin budget now */
    uint64_t waits_contended;       /* spins cut short: a yield ran other work on this CPU */
    uint64_t waits_unspun;          /* waits that did not spin: blocking was the faster way */

    /* -- added in session 4 too: the record layer (coc_engine_set_peer_wire; append only) -- */
    uint64_t record_plain_sent;     /* stream bytes that went into records sent */
    uint64_t record_wire_sent;      /* bytes of those records on the wire (headers, tags) */
    uint64_t record_plain_received; /* stream bytes taken out of records received */
    uint64_t record_wire_received;  /* bytes of those records on the wire */
    uint64_t records_raw;           /* records sent uncompressed after trying: no gain */

    /* -- added in session 4 too: failover (native/src/reliable.c; append only) -- */
    uint64_t failovers;             /* gateway connections lost whose routes moved to others */
    uint64_t frames_resent;         /* sequenced frames (and streams) sent again after a loss */
    uint64_t duplicates_dropped;    /* sequenced frames dropped: seen already or out of order */

    /* -- added in session 5: system calls per frame (issue 17; append only) -- */
    uint64_t socket_reads;          /* reads of a TCP or unix socket that brought bytes */
    uint64_t socket_writes;         /* sendmsg calls that wrote frames to a socket */
    uint64_t frames_held;           /* frames held by send coalescing (coc_engine_config) */

    /* -- added in session 8: gateways (native/src/forward.c; append only) -- */
    uint64_t peers_dialed_back;     /* endpoints whose connection ended without BYE that
                                       answered a dial back: alive, not reported lost */

    /* -- added in session 9: the waiter's reads (native/src/wait.c; append only) -- */
    uint64_t reads_unpolled;        /* reads that brought bytes without an epoll_wait before
                                       them: a spinner read the connection that brought
                                       the last frame after a yield that ran other work */

    /* -- added in session 10: the blocked waiter's reads (native/src/wait.c; append only) -- */
    uint64_t reads_blocked;         /* reads in which a blocked waiter slept itself, on the
                                       engine's only connection: no epoll_wait before them */

    /* -- added in session 11: the watchdog's progress (coc/rendezvous.py; append only) -- */
    uint64_t requests_completed;    /* sends and receives completed (also with an error):
                                       what moves only when the application's operations
                                       do, not when frames are sent again */
} coc_stats;

int coc_engine_stats(coc_engine *e, coc_stats *st);

/*
 * Copy the engine's recent log lines (peer dropped, authentication failed, protocol error,
 * ...) into buf, oldest first, one per line, and forget them. The engine never prints;
 * the caller decides where these go. Returns the number of bytes written.
 */
int coc_engine_take_log(coc_engine *e, char *buf, size_t len);

/*
 * 1 when the engine holds an authenticated connection to endpoint `id` (made by either
 * end), 0 when it holds none yet (not dialed, still connecting or in the handshake, or
 * lost). Added after 0.1.0: a gateway that must dial out (its site accepts no inbound
 * connections) waits on it until its link is up before the job's ranks start.
 */
int coc_engine_peer_connected(coc_engine *e, uint32_t id);

/*
 * The record layer (added after 0.1.0; docs/wire-protocol.md "Record layer"). A connection
 * this engine dials over TCP to endpoint `id` after this call carries its frames in
 * records: encrypted (AES-256-GCM, keys derived from the authenticated handshake) with
 * COC_WIRE_ENCRYPT, compressed with zstd or lz4 (adaptively: incompressible data goes raw)
 * with COC_WIRE_ZSTD or COC_WIRE_LZ4. The connector's hello announces it and both ends
 * use it in both directions. As the accepting end, an engine told COC_WIRE_ENCRYPT for
 * `id` refuses (COC_EAUTH) a connection from `id` that does not ask for encryption, and
 * compresses what it sends back with its own codec (else the connector's). Unix-socket
 * and shared-memory connections (same host) never use it. 0 turns it off. COC_EINVAL for
 * unknown flags or two codecs.
 */
#define COC_WIRE_ENCRYPT 0x1
#define COC_WIRE_ZSTD 0x2
#define COC_WIRE_LZ4 0x4
int coc_engine_set_peer_wire(coc_engine *e, uint32_t id, uint32_t flags);

#ifdef __cplusplus
}
#endif
#endif /* COC_COC_H */
