/*
 * engine.h — the engine's internal structures, shared by its files: engine.c (life cycle,
 * completion, stats, log), progress.c (the progress thread), wait.c (coc_wait and
 * friends), peers.c (addresses, peers, routes), conn.c, conn_rx.c and conn_tx.c (a
 * connection: set-up and end, reading, writing), handshake.c (its first bytes), match.c
 * (queues), post.c (posting sends and receives), protocol.c (eager/rendezvous frames),
 * failures.c (lost peers fail requests), reliable.c (failover) and
 * forward.c (gateway mode).
 *
 * Locks. Two mutexes, always taken in this order:
 *   plock — "the progress token": whoever holds it reads sockets and parses frames (the
 *           progress thread, or a thread spinning in coc_wait/coc_test, which thus gets
 *           its message without a cross-core wake-up; see docs/wire-protocol.md).
 *   lock  — everything else: requests, queues, routes, peers, the send side of every
 *           connection, stats and the log. Callers of isend/irecv take only this one, so
 *           they never wait for a socket read; writes are non-blocking and short.
 * A connection is freed only with both held, so the progress side may use a connection
 * without `lock`, and callers may use one without `plock`.
 */
#ifndef COC_ENGINE_H
#define COC_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "coc/coc.h"
#include "flows.h"
#include "list.h"
#include "record.h"
#include "route.h"
#include "shm.h"
#include "wire.h"

#define COC__MAX_CONNS 4096           /* connection slots per engine */
#define COC__CORK_MAX 16              /* connections whose forwarded frames wait per batch */
#define COC__RBUF 65536               /* per-connection read buffer */
#define COC__SPARE_REQS 8             /* released requests an engine keeps for reuse */
#define COC__BLOCK_SLICE_MS 10        /* a waiter blocked in a system call looks up this often */
#define COC__DIRECT_READ 8192         /* payload left above which we read straight into place */
/* Eager limit, from measurement (pinned ping-pong, half round trip, unix/TCP): eager vs
 * rendezvous at 64 KiB 16/20 vs 27/41 us, 128 KiB 23/27 vs 39/54 us, 256 KiB 59/41 vs
 * 61/72 us. Eager wins up to 256 KiB; 128 KiB keeps what an unexpected message may take
 * at the receiver moderate. */
#define COC__DEFAULT_EAGER (128u << 10)
#define COC__DEFAULT_FRAGMENT (256u << 10)
#define COC__DEFAULT_WINDOW (4u << 20)
#define COC__COPY_BUDGET (4u << 20)   /* eager bytes copied per connection before sends wait */
/* End-to-end eager credit per pair of endpoints: this many eager messages of the largest
 * size, each charged its payload plus a header (so empty messages count too). */
#define COC__CREDIT_EAGERS 8
#define COC__POOL_CLASSES 14          /* forwarding buffers of 4 KiB << k plus a header page */
#define COC__DEFAULT_HANDSHAKE_MS 10000
#define COC__LOG_LINES 64
#define COC__LOG_LINE 200
#define COC__CLOSE_LINGER_NS 5000000000LL /* close waits this long for queued frames to leave */

/* Keys registered with the poller that are not connections. */
#define COC__KEY_WAKE 1
#define COC__KEY_TIMER 2
#define COC__KEY_LISTEN_TCP 3
#define COC__KEY_LISTEN_UNIX 4
#define COC__KEY_INNER 5
#define COC__KEY_CONN_MIN 16

typedef struct coc__conn coc__conn;
typedef struct coc__item coc__item;

/* What a connection calls on its owner, the engine: set at the connection's creation
 * (e->conn_calls, filled in engine.c), so the connection code (conn*.c) names none of the
 * protocol, forwarding or failover functions that use it. */
typedef struct coc__conn_calls {
    /* receive path (plock) */
    int (*on_frame)(coc__conn *c);     /* a header for this endpoint: <0 error */
    void (*on_frame_end)(coc__conn *c); /* its payload is complete */
    int (*on_forward)(coc__conn *c);   /* a header for another endpoint (a gateway): 0
                                          started, 1 paused on a full window, <0 error */
    void (*on_forward_bytes)(coc__conn *c, const uint8_t *src, size_t n);
    /* send path (lock) */
    void (*on_forward_written)(coc__conn *out, coc__item *it); /* a forwarded item left:
                                          it takes the item (forward.c recycles it) */
    /* a STREAM item of send s died with its connection: its receiver must hear */
    void (*on_stream_failed)(coc_engine *e, coc_request *s, uint64_t rcookie);
    /* the end (plock + lock): before its queue is dropped (returns 1 when the routes
     * through it failed over to other hops), and after */
    int (*on_closing)(coc__conn *c);
    void (*on_closed)(coc_engine *e, int failover);
    /* the handshake is complete, both ends proved their ids (lock) */
    void (*on_open)(coc__conn *c);
} coc__conn_calls;

/* Request state word (futex): pending, pending with a sleeper, done. */
#define COC__REQ_PENDING 0
#define COC__REQ_SLEEPER 1
#define COC__REQ_DONE 2

enum coc__req_kind { COC__SEND = 1, COC__RECV = 2 };
enum coc__req_phase {
    COC__POSTED = 1,   /* recv: in the posted queue */
    COC__MATCHED,      /* recv: an eager frame is being read into it */
    COC__RDV,          /* recv: CTS sent, DATA expected;  send: RTS sent or data streaming */
    COC__FINISHED
};

struct coc_request {
    coc_engine *e;
    coc__link link;                    /* e->reqs: the engine's live requests */
    coc__link qlink;                   /* e->posted: the posted-receive queue */
    _Atomic int state;                 /* COC__REQ_* */
    uint8_t kind, phase;
    coc_status st;
    int32_t peer;                      /* send: destination; recv: source filter */
    uint32_t context;
    int32_t tag;
    const uint8_t *sbuf;               /* send buffer */
    uint8_t *rbuf;                     /* receive buffer */
    size_t len;                        /* send length or receive capacity */
    uint64_t want, got;                /* rendezvous receive progress */
    uint64_t cookie;                   /* rendezvous handle, 0 if none */
    uint64_t conn_key;                 /* connection the operation depends on */
    uint16_t busy;                     /* recv: connections reading payload into it;
                                          send: queue items still holding its buffer */
    int doomed;                        /* failure to report when that read ends */
    uint8_t alloc;                     /* recv (coc_irecv_alloc): rbuf is the engine's,
                                          allocated at match, freed with the request
                                          unless coc_request_take_buffer took it */
    uint8_t *joined;                   /* send (coc_isendv): owned copy of a small gather */
    coc_iovec *iov;                    /* send (coc_isendv): owned gather list, or NULL */
    size_t niov;
    /* failover (reliable.c): a rendezvous whose bytes cross a gateway. send: complete only
     * on the receiver's DONE (its bytes may have to be sent again); recv: count each
     * fragment once (frags: a bit per fragment) and answer DONE. */
    uint8_t keep, confirmed;
    uint8_t relane;                    /* send: a lane died with its connection */
    uint64_t peer_cookie;              /* send: receiver handle (CTS); recv: sender handle */
    uint8_t *frags;                    /* recv: a bit per fragment of funit bytes arrived */
    uint32_t funit;                    /* recv: the sender's fragment size (seen on one) */
    uint8_t last_seen;                 /* recv: the last fragment arrived */
};

/* An unexpected message: a complete eager message, or a rendezvous envelope. */
typedef struct coc__umsg {
    coc__link link;                    /* e->unexp */
    uint8_t type;                      /* COC__EAGER or COC__RTS */
    uint8_t flags;                     /* RTS: its frame flags (COC__FLAG_CONFIRM) */
    uint32_t source, context;
    int32_t tag;
    uint64_t total, scookie;
    uint64_t conn_key;                 /* connection it came on */
    uint8_t *data;                     /* eager payload (total bytes) */
} coc__umsg;

enum coc__item_kind { COC__IT_FRAME = 1, COC__IT_STREAM, COC__IT_FWD };

/* A rendezvous send striped over the large route: fragment i leaves on lane[i], one
 * STREAM item (on one connection) per lane; shared by those items. */
typedef struct coc__stripe {
    size_t refs;                       /* STREAM items still using it */
    uint64_t nfrag;
    uint8_t lane[];
} coc__stripe;

/* Something queued for writing on a connection. */
struct coc__item {
    coc__link link;                    /* its connection's queue (c->queue) */
    uint8_t kind;
    uint8_t hdr[COC__HDR_LEN];         /* FRAME/STREAM: the current frame's header */
    const uint8_t *data;               /* FRAME/STREAM: the current frame's payload */
    size_t len;                        /* its length */
    size_t off;                        /* bytes of the current frame written */
    uint8_t *owned;                    /* FRAME: owned payload copy; FWD: header+payload buffer */
    size_t filled, size;               /* FWD: bytes present / frame size (cut-through) */
    coc_request *req;                  /* STREAM, or FRAME sent by reference: completes at the end */
    coc__hdr sh;                       /* STREAM: header template */
    coc__stripe *stripe;               /* STREAM: which fragments are this item's */
    uint8_t lane;                      /* STREAM: its lane */
    uint64_t spos;                     /* STREAM: next fragment index to consider */
    uint64_t sub;                      /* STREAM: bytes of fragment spos already framed
                                          (a gather's buffer ended inside it) */
    uint64_t due_ns;                   /* latency emulation: not before this time */
};

enum coc__conn_state { COC__CS_CONNECTING = 1, COC__CS_HANDSHAKE, COC__CS_OPEN, COC__CS_DEAD };
enum coc__rx_state { COC__RX_HELLO = 1, COC__RX_PROOF, COC__RX_HDR, COC__RX_PAYLOAD, COC__RX_PAUSED };


struct coc__conn {
    coc_engine *e;
    const coc__conn_calls *on;         /* its owner's handlers (e->conn_calls) */
    int fd;
    uint64_t key;                      /* poller key: slot | generation << 32 */
    uint8_t state, outgoing, unix_, bye, authed;
    uint32_t peer_id;                  /* expected (outgoing) or learnt from the hello */
    uint64_t deadline_ns;              /* handshake must finish by then */
    coc__hello mine, theirs;
    uint8_t pair_key[COC_KEY_LEN];     /* the pair's key the proofs use (handshake.c) */
    uint8_t duplicate;                 /* refused: its endpoint id is connected already */
    char where[64];                    /* its address: "tcp://127.0.0.1:4000", "tcp from ..." */
    char name[96];                     /* for log lines: "endpoint 3 (tcp://127.0.0.1:4000)" */
    /* send side, under e->lock */
    uint8_t hs_out[COC__HELLO_LEN + COC__PROOF_LEN];
    size_t hs_len, hs_off;
    coc__list queue;                   /* coc__item: frames and forwarded items to write */
    unsigned events;                   /* registered with the poller */
    uint64_t delay_ns;
    uint64_t last_post_ns;             /* send coalescing: when the last frame was posted */
    uint64_t held_since;               /* send coalescing: when the first held frame was */
    uint32_t nheld;                    /* frames held for coalescing now (0: not held) */
    size_t fwd_queued;                 /* forwarded bytes queued here */
    size_t copied;                     /* eager payload bytes copied into this queue */
    coc__list waiters;                 /* incoming connections paused on this one's window */
    coc__link waiter_link;             /* on paused_on->waiters */
    coc__conn *paused_on;
    coc__flows flows;                  /* gateway: who to tell if this connection dies */
    /* receive side, under e->plock */
    uint8_t *rbuf;
    size_t rpos, rlen;
    uint8_t rstate;
    coc__hdr rh;
    uint64_t rleft, rdone;             /* payload bytes left / done of the current frame */
    uint64_t rpre;                     /* payload bytes forward_begin took from rbuf */
    uint8_t *sink;                     /* where payload goes (bytes beyond sink_cap dropped) */
    uint64_t sink_cap;
    coc_request *rreq;                 /* EAGER matched / DATA target */
    coc__umsg *rumsg;                  /* EAGER unexpected */
    coc__item *rfwd;                   /* FWD: the item being filled */
    coc__conn *rfwd_out;               /* FWD: the connection it goes out on */
    uint8_t rfwding;                   /* the current frame is being forwarded (or dropped) */
    uint8_t rdrop;                     /* the current frame is a duplicate: read and dropped */
    uint8_t cut;                       /* we closed it ourselves (a frame it carried broke) */
    uint8_t dialback;                  /* gateway: dialed to learn whether the endpoint of a
                                        * connection that ended without BYE lives (forward.c) */
    uint64_t rx_count, rx_seen;        /* liveness: reads so far / at the last check */
    uint64_t rx_stamp_ns;              /* when rx_count last moved */
    int err;                           /* DEAD: why */
    const char *why;
    coc__link resumed_link;            /* on e->resumed */
    /* same-host shared memory (shm.h): once authenticated, frames go through the rings
     * and the unix socket only carries doorbell bytes and the close */
    int shm_fd;                        /* segment to send (connector) or received; -1 */
    coc__ring tx, rx;                  /* mapped (tx.ctl set) when this connection uses shm */
    uint8_t ring;                      /* reading from rx (after the proof) */
    coc__link shm_link;                /* on e->shm; changed with both locks held */
    /* record layer (record.h): set at the proof on a TCP connection whose connector asked */
    coc__rec *rec;
    uint32_t wire;                     /* acceptor: its own COC_WIRE_* for the peer (hello) */
    /* gateway (forward.c, plock + lock): the last next hop of a frame read here that is
     * not DATA, kept while the routes stay as they were (coc__route_gen) */
    uint64_t fwd_gen;                  /* coc__route_gen() when chosen; 0: none */
    uint32_t fwd_source, fwd_dest;
    struct coc__peer *fwd_peer;        /* the hop (peers are freed only with the engine) */
    int parked;                        /* lock: out of the poller while paused after a hang-up
                                        * (conn_rx.c coc__conn_event); back on unpause */
    uint8_t blocking;                  /* its socket blocks, with a receive timeout of
                                        * COC__BLOCK_SLICE_MS; every other call on it passes
                                        * MSG_DONTWAIT (progress.c coc__progress_lone) */
    uint8_t rx_wait;                   /* plock: the next read may block (then cleared) */
    uint64_t fwd_out_key;              /* plock + lock: the connection the remembered pair's
                                        * flows were last added to (forward.c); 0: none */
    uint8_t flows_full;                /* lock: flows had no room for a pair (logged once) */
};

typedef struct coc__peer {
    uint32_t id;
    char ip[64];
    uint16_t port;
    char unix_name[108];               /* set only when the peer is on this host and netns */
    uint64_t conn_key;                 /* the connection we send on, 0 if none */
    uint64_t delay_ns;
    uint32_t wire;                     /* COC_WIRE_*: record layer on connections to it */
    uint8_t down;                      /* a hop that could not be reached or went silent:
                                        * never put back into a route (reliable.c) */
} coc__peer;

/* Eager credit with one other endpoint (docs/wire-protocol.md "Credits"). A sender may
 * have at most e->credit bytes of eager messages (charged by coc__eager_cost) towards a
 * receiver that the receiver has not returned in CREDIT frames; past that, its messages go
 * by rendezvous, which costs the receiver only an envelope. */
typedef struct coc__kept coc__kept;
typedef struct coc__credit {
    uint64_t avail;                    /* sender: credit left towards this endpoint */
    uint64_t held;                     /* receiver: its eager bytes received, not returned */
    uint64_t owed;                     /* receiver: of those, delivered: to return */
    /* reliable.c: sequence numbers and acknowledgements, end to end */
    uint64_t returned;                 /* receiver: credit returned so far (mod 2^40) */
    uint64_t seen;                     /* sender: the last cumulative credit count heard */
    uint64_t expect;                   /* receiver: next sequence number accepted from it */
    uint64_t acked;                    /* sender: it accepted every sequence number below */
    coc__list kept;                    /* sender: coc__kept, sequenced frames not yet acknowledged */
    size_t kept_bytes;
    uint64_t acked_seen;               /* sender: acked at the last liveness tick */
    uint64_t nacked;                   /* receiver: expect when we last asked to resend */
    uint64_t dupacked;                 /* receiver: expect when we last acknowledged a repeat */
    uint8_t stuck;                     /* sender: ticks with kept frames and no progress */
} coc__credit;

typedef struct coc__dest {
    coc__route route[2];               /* by size class: COC_CLASS_SMALL, COC_CLASS_LARGE */
    uint8_t has[2];                    /* which classes were set (else they share the other) */
    uint64_t seq;                      /* last sequence number given towards this destination */
    coc__route *set;                   /* both routes as set, kept once a hop leaves one */
} coc__dest;

#define COC__WAY_SAMPLES 16 /* waits per score of a way of waiting (wait.c) */
#define COC__WAIT_CLASSES 2 /* waits for small messages and for large ones choose apart (wait.c) */

/* How one class of waits waits (wait.c, way_of and score): spin first or block at once,
 * by the scores of their recent waits. */
typedef struct coc__way_choice {
    _Atomic int block_best;            /* blocking at once is the faster way to wait */
    _Atomic uint64_t try_every;        /* slots between tries of the other way */
    _Atomic uint64_t way_ns[2];        /* spinning's and blocking's scores, ns; 0: not known */
    _Atomic uint32_t way_n[2];         /* waits sampled per way since its last score */
    _Atomic uint32_t way_sample[2][COC__WAY_SAMPLES]; /* how long they took, ns */
    uint64_t doubled_slot;             /* spin_lock: the slot whose try last doubled try_every */
    uint64_t way_slot[2];              /* spin_lock: the slot of each way's last score */
    _Atomic int spin_median_spun;      /* the spinning way's last median wait ended spinning */
} coc__way_choice;

struct coc_engine {
    coc_engine_config cfg;
    const coc__conn_calls *conn_calls; /* given to every connection (engine.c) */
    uint8_t secret[COC_SECRET_MAX];    /* the job's secret (cfg.secret_len bytes), or none */
    coc_peer_key *keys;                /* without a secret: the issued keys, sorted by id */
    size_t nkeys;
    uint32_t self;
    int forward;
    pthread_mutex_t plock, lock;
    pthread_cond_t cond;               /* with lock: unexpected arrivals, queues drained */
    pthread_t thread;
    _Atomic int stopping;
    int pfd, wfd, tfd, nfd;            /* poller, wake eventfd, delay timerfd, notify eventfd */
    int ofd;                           /* outer poller of the progress thread: pfd + wfd */
    pthread_mutex_t spin_lock;         /* guards spinners and arming pfd in ofd */
    int spinners;                      /* threads polling pfd themselves right now */
    int quiet;                         /* pfd disarmed in ofd: spinners poll it (wait.c) */
    int progress_away;                 /* spin_lock: the progress thread sleeps long (wait.c) */
    uint64_t wait_gen, gen_seen;       /* spin_lock: spins begun; as the progress thread last saw */
    _Atomic uint64_t polite_until;     /* spinners yield at every look until then (wait.c) */
    _Atomic int64_t spin_budget;       /* adaptive spin of coc_wait, ns (wait.c) */
    _Atomic uint64_t waits[4];         /* how waits ended: at once, spun, polled, slept */
    _Atomic uint64_t spun_ns;          /* time waiters spent spinning */
    _Atomic uint64_t waits_contended;  /* spins cut short: another thread wanted the CPU */
    _Atomic uint64_t waits_unspun;     /* waits that did not spin: blocking was the faster way */
    coc__way_choice ways[COC__WAIT_CLASSES]; /* spin or block, per wait class (wait.c) */
    int cpus;                          /* CPUs this process may run on (spin: pinned or not) */
    int corking;                       /* plock: forwarded frames wait for coc__conn_uncork */
    _Atomic int ncorked;               /* lock (read unlocked by waits): connections in corked */
    coc__conn *corked[COC__CORK_MAX];  /* lock: queues holding corked forwarded or held frames */
    uint64_t hold_ns;                  /* send coalescing (conn_tx.c); 0: off */
    _Atomic int notified;
    int tcp_fd, unix_fd, reserve_fd;
    uint16_t tcp_port;
    char unix_name[100];
    char host_token[64];
    uint64_t timer_due;                /* 0: delay timer unarmed */
    coc__conn *conns[COC__MAX_CONNS];
    uint32_t conn_gen;
    _Atomic size_t nhandshaking;       /* read unlocked by the progress loop's timeout */
    coc__map peers;                    /* id -> coc__peer */
    coc__map dests;                    /* id -> coc__dest */
    coc__map credits;                  /* id -> coc__credit */
    uint64_t credit;                   /* eager credit per pair (COC__CREDIT_EAGERS) */
    coc__list reqs;                    /* coc_request (link): live requests */
    coc__list posted;                  /* coc_request (qlink): posted receives, in order */
    coc__list unexp;                   /* coc__umsg: unexpected messages, in arrival order */
    coc_request **rdv;                 /* rendezvous handles: slot -> request */
    uint32_t *rdv_gen;
    size_t rdv_cap;
    coc__list resumed;                 /* coc__conn (resumed_link): paused ones to restart */
    coc__list shm;                     /* coc__conn (shm_link): connections reading from a ring */
    size_t shm_ring;                   /* ring bytes per direction offered; 0: no shm */
    void *pool[COC__POOL_CLASSES];     /* free forwarding buffers, linked through their first bytes */
    size_t pool_bytes;
    size_t ndead;                      /* connections marked dead, not yet reaped */
    uint64_t last_sweep_ns;
    uint64_t liveness_ns;              /* a connection silent this long is dead; 0: never */
    int lossy;                         /* a path lost frames once: retransmit on timeouts too */
    uint64_t last_ping_ns;
    int probe_waiters;
    coc_stats stats;
    char log[COC__LOG_LINES][COC__LOG_LINE];
    size_t log_head, log_count;
    void *fwd_items;                   /* free forwarding items (forward.c), linked through their
                                        * first bytes; pool_bytes counts them too */
    uint64_t hot;                      /* plock: key of the connection that brought the last
                                          frame; a spinner reads it first (progress.c) */
    uint32_t incarnation;              /* random, nonzero, in every hello: tells this process's
                                        * redial from another claiming its id (handshake.c) */
    int look_ms;                       /* spin_lock: the progress thread's next look back while
                                          waiters hold pfd (wait.c coc__progress_sleep_ms) */
    coc_request *spare[COC__SPARE_REQS]; /* lock: released requests kept for reuse (post.c) */
    size_t nspare;
    /* plock, a gateway's round (progress.c handle): */
    uint8_t input_last;                /* the event being handled is the round's last input */
    uint8_t input_end;                 /* ... and its last read emptied the socket: a frame
                                        * that ends the bytes read is the round's last */
    uint8_t timer_fired;               /* the delay timer fired: housekeeping looks at the clock */
};

/* engine.c */
uint64_t coc__now_ns(void);
void coc__log(coc_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void coc__complete(coc_engine *e, coc_request *r, int error); /* under lock */
void coc__wake(coc_engine *e);                                /* poke the progress thread */
void coc__notify(coc_engine *e);                              /* make coc_engine_fd readable */

/* progress.c */
int coc__progress(coc_engine *e, int timeout_ms);             /* under plock */
void coc__progress_rings(coc_engine *e);          /* under plock: the rings, no system call */
int coc__progress_hot(coc_engine *e); /* plock: read e->hot unpolled: 1 bytes, 0 none, -1 no e->hot */
/* plock: sleep in the recv of the engine's only connection: 1 bytes, 0 none, -1 not possible */
int coc__progress_lone(coc_engine *e);
void *coc__progress_main(void *arg);                          /* the progress thread */
void coc__drain(int fd);                                      /* empty an eventfd/timerfd */
/* plock: the progress thread is about to sleep: ask writers to our rings for doorbells
 * unless a thread spins; 1 when data came meanwhile (do not sleep) */
int coc__going_idle(coc_engine *e);
int coc__progress_sleep_ms(coc_engine *e, int idle_ms); /* wait.c: the lazy hand-off of pfd */
/* Whether the engine has shared-memory rings; read without the token, as a hint (a ring
 * that comes meanwhile is only read a look later). */
static inline int coc__has_rings(coc_engine *e)
{
    return __atomic_load_n(&e->shm.head, __ATOMIC_RELAXED) != NULL;
}

/* wait.c: how waits ended, indexes of e->waits (coc_engine_stats) */
enum { COC__WAIT_AT_ONCE, COC__WAIT_SPUN, COC__WAIT_POLLED, COC__WAIT_SLEPT };

/* way.c: spin first (0) or block at once (1), the spin budget, and what they learn */
coc__way_choice *coc__wait_class(coc_request *r);           /* the choice r's waits share */
int coc__way_of(coc_engine *e, coc__way_choice *w, uint64_t now);
uint64_t coc__spin_budget(coc_engine *e, int way);         /* ns; 0 when it blocks at once */
void coc__wait_ended(coc_engine *e, coc__way_choice *w, int way, uint64_t start, uint64_t waited,
                     int spun);                             /* `spun`: ended while spinning */
void coc__wait_unended(coc_engine *e);                      /* a wait timed out */

/* conn.c, conn_rx.c, conn_tx.c (send side under lock; receive side under plock) */
coc__conn *coc__conn_get(coc_engine *e, uint64_t key);
/* The connection peer entry p names (the one we send to that peer on), if it is alive: not
 * DEAD, though perhaps still in its handshake; NULL when p is NULL or names none. */
coc__conn *coc__peer_conn(coc_engine *e, const coc__peer *p);
coc__conn *coc__conn_to(coc_engine *e, uint32_t hop, int *rc);      /* connect if needed */
int coc__conn_accept(coc_engine *e, int lfd, int unix_);             /* plock + lock */
void coc__conn_event(coc_engine *e, coc__conn *c, unsigned events); /* plock */
void coc__conn_push(coc__conn *c, coc__item *it);                  /* lock: queue and flush */
void coc__conn_uncork(coc_engine *e);                                /* lock: flush corked */
void coc__conn_release_held(coc_engine *e);                          /* flush held frames (takes lock) */
uint64_t coc__conn_hold_ns(const coc_engine_config *cfg, int forward); /* send coalescing window */
void coc__conn_flush(coc__conn *c);                                 /* lock */
void coc__conn_fail(coc__conn *c, int err, const char *why);        /* lock: mark dead */
/* lock: write or queue a frame. The payload is copied while the connection's copy budget
 * lasts (0: done); past it, or before the connection is open, with req given, it is
 * queued by reference and req completes when it is written (1: pending). */
int coc__conn_send(coc__conn *c, const coc__hdr *h, const void *payload, coc_request *req);
/* lock: point a STREAM item at its lane's next fragment; 0 when it has none left. */
int coc__stream_next(coc_engine *e, coc__item *it);
void coc__conn_reap(coc_engine *e);                                 /* plock + lock: free dead ones */
int coc__conn_parse(coc__conn *c);                                  /* plock: parse buffered bytes */
int coc__conn_unpause(coc__conn *c);                                /* plock: retry a paused frame */
void coc__conn_set_in(coc__conn *c, int on);                        /* lock */
void coc__conn_flush_delayed(coc_engine *e);                        /* lock */
/* lock: the delay timer (COC__KEY_TIMER) fires at `due` (CLOCK_MONOTONIC ns) or earlier */
void coc__conn_arm_timer(coc_engine *e, uint64_t due);
void coc__conn_sweep(coc_engine *e);                                /* plock + lock: handshake deadlines */
void coc__conn_poll_rings(coc_engine *e);                           /* plock: read what rings hold */
/* plock: nobody will poll the rings for a while: ask writers to ring the doorbell (on = 1;
 * returns 1 when data came meanwhile) or not (on = 0, a thread polls them now). */
int coc__conn_rings_idle(coc_engine *e, int on);

/* handshake.c */
void coc__hs_shm_offer(coc__conn *c);                             /* at set-up: offer shm */
void coc__hs_wire_offer(coc__conn *c, uint32_t wire);             /* at set-up: ask for records */
int coc__hs_hello(coc__conn *c, const uint8_t *bytes);            /* plock: their hello came */
int coc__hs_proof(coc__conn *c, const uint8_t *bytes);            /* plock: their proof came */
ssize_t coc__hs_recv_hello(coc__conn *c, uint8_t *dst, size_t want); /* plock: acceptor's read */
int coc__hs_write(coc__conn *c);                                  /* lock: 0 sent, 1 wait, <0 */
/* plock: 0 when the frame just decoded may come from this connection's peer (its source is
 * the peer, or the peer is a gateway); else COC_EPROTO, logged */
int coc__hs_source_ok(coc__conn *c, const coc__hdr *h);

/* match.c (under lock) */
int coc__matches(int32_t want_src, uint32_t want_ctx, int32_t want_tag, uint32_t src,
                 uint32_t ctx, int32_t tag);
coc_request *coc__posted_take(coc_engine *e, uint32_t src, uint32_t ctx, int32_t tag);
void coc__posted_add(coc_engine *e, coc_request *r);
void coc__posted_remove(coc_engine *e, coc_request *r);
coc__umsg *coc__unexp_find(coc_engine *e, int32_t src, uint32_t ctx, int32_t tag);
void coc__unexp_add(coc_engine *e, coc__umsg *u);
void coc__unexp_remove(coc_engine *e, coc__umsg *u);
uint64_t coc__rdv_alloc(coc_engine *e, coc_request *r);
coc_request *coc__rdv_lookup(coc_engine *e, uint64_t cookie);
void coc__rdv_free(coc_engine *e, uint64_t cookie);
int coc__rdv_spent(coc_engine *e, uint64_t cookie);

/* protocol.c: frames addressed to this endpoint, and the steps posting shares with them */
uint8_t *coc__buf_alloc(uint64_t size);    /* 64-byte aligned, at least 64 bytes */
uint8_t *coc__held_alloc(uint64_t size);   /* an unexpected message's copy: at least 64
                                              bytes, 64-byte aligned from 1 KiB */
/* receive r (coc_irecv_alloc) takes over unexpected eager message u's payload if it fits */
void coc__adopt(coc_request *r, coc__umsg *u);
void coc__fill_status(coc_request *r, uint32_t src, uint32_t ctx, int32_t tag, uint64_t total);
uint64_t coc__eager_cost(uint64_t len);   /* what an eager message of len bytes costs in credit */
/* lock: a complete eager message for matched receive r; its credit goes back to src */
void coc__deliver(coc_engine *e, coc_request *r, uint32_t src, uint32_t ctx, int32_t tag,
                  const uint8_t *data, uint64_t total, uint64_t conn_key);
/* lock: receive r matched a rendezvous envelope: ask the sender for the bytes r can hold */
void coc__rdv_accept(coc_engine *e, coc_request *r, uint32_t src, uint32_t ctx, int32_t tag,
                     uint64_t total, uint64_t scookie, uint64_t conn_key, uint8_t flags);
int coc__frame_begin(coc__conn *c);    /* plock: a header addressed to us was decoded */
void coc__frame_end(coc__conn *c);     /* plock: its payload is complete */
int coc__send_ctrl(coc_engine *e, const coc__hdr *h, uint64_t fallback_conn); /* lock */

/* post.c (lock) */
int coc__probe_locked(coc_engine *e, int32_t source, uint32_t context, int32_t tag, coc_status *st);
void coc__request_release(coc_engine *e, coc_request *r);            /* lock: unlink, free */
void coc__requests_drop(coc_engine *e);                              /* lock: free the spare ones */

/* failures.c (lock) */
/* fail request r (a receive's source: `source`), or doom it while a frame is read into it */
void coc__fail_request(coc_engine *e, coc_request *r, int32_t source, int error);
/* lock; failover: c was a gateway whose destinations all moved to other hops (reliable.c) */
void coc__lost_conn(coc_engine *e, coc__conn *c, int failover);
void coc__lost_id(coc_engine *e, uint32_t id, int error);            /* lock */
/* Fail what needs endpoint id: sends to it, and with COC_EPEERLOST receives from it (and
 * with ANY_SOURCE) and its unmatched envelopes (lock). */
void coc__fail_peer(coc_engine *e, uint32_t id, int error);
void coc__stream_failed(coc_engine *e, coc_request *s, uint64_t rcookie); /* lock */

/* reliable.c (under lock; docs/wire-protocol.md "Failover") */
#define COC__FLAG_CONFIRM 0x1          /* RTS: the receiver answers DONE when all bytes came */
#define COC__CREDIT_MOD ((uint64_t)1 << 40)
coc__credit *coc__credit_of(coc_engine *e, uint32_t peer);
/* Does a message to dest cross a gateway (then it is kept until acknowledged)? */
int coc__rel_protected(coc_engine *e, const coc__dest *d, uint32_t dest);
/* Give h its sequence number and acknowledgement; keep a copy when protected. */
int coc__rel_stamp(coc_engine *e, coc__dest *d, coc__hdr *h, const void *payload, int keep);
/* A sequenced frame from h->source arrived: 1 to process it, 0 to drop it (duplicate or
 * out of order: its sender sends it again). Acknowledgements are taken in any case. */
int coc__rel_accept(coc_engine *e, const coc__hdr *h);
void coc__rel_ack(coc_engine *e, uint32_t peer, uint64_t ack);
/* Send again what dest has not acknowledged, on the current routes. */
void coc__rel_resend(coc_engine *e, uint32_t dest);
/* Stream again, on the current routes, the rendezvous sends whose lanes were dropped with a
 * lost connection (after its queue was emptied: the reroute came first). */
void coc__rel_relane(coc_engine *e);
/* A connection to a gateway died without BYE (or could not be made: `down`): take `hop` out
 * of every route that has other hops — or, where it was the last, put back the hops the
 * route was set with that are not down — and resend towards those destinations. Returns
 * how many destinations were left with no hop (those fail as before). */
size_t coc__rel_reroute(coc_engine *e, uint32_t hop, const char *why, int down);
/* The connection for dest's small route, moving off hops that cannot be reached. */
coc__conn *coc__rel_conn_to(coc_engine *e, coc__dest *d, uint32_t dest, int *rc);
int coc__rel_rerouted(coc_engine *e, uint32_t dest, uint32_t hop); /* dest moved off hop */
/* Gateway `hop` says it cannot reach dest (an ERROR frame): route dest around it when the
 * route has another hop, and resend (1); else 0: dest is lost. */
int coc__rel_avoid(coc_engine *e, uint32_t dest, uint32_t hop);
void coc__rel_unread(coc_engine *e, coc__conn *c);    /* c died mid-frame: undo its accept */
void coc__rel_liveness(coc_engine *e);                /* lock: ping quiet, drop silent */
void coc__rel_forget(coc__credit *cr);                /* free kept frames */
/* A DATA fragment for receive r (keep): 1 when it arrived before; mark = 1 records it. */
int coc__rel_fragment(coc_request *r, const coc__hdr *h, int mark);
/* protocol.c and failures.c steps reliable.c uses */
int coc__stream_out(coc_engine *e, coc_request *s, uint64_t total, uint64_t rcookie);
/* Receive r after a payload read into it ended (read, or undone with its connection): once
 * nothing is mid-read, it fails if doomed, or completes when every byte came (a kept one
 * answers DONE first). Until then, nothing. */
void coc__recv_settle(coc_engine *e, coc_request *r);

/* forward.c (plock) */
int coc__forward_begin(coc__conn *c);  /* 0 started, 1 paused on a full window, <0 error */
void coc__forward_data(coc__conn *c, const uint8_t *src, size_t n);
void coc__forward_lost(coc_engine *e, coc__conn *c);                 /* plock + lock */
void coc__forward_opened(coc__conn *c);                              /* lock: authenticated */
/* c ended and is an endpoint's: its end is no verdict yet, the gateway dials it back */
int coc__forward_dials_back(const coc_engine *e, const coc__conn *c);
void coc__forward_resume(coc_engine *e);                              /* plock: restart paused */
void coc__forward_done(coc__conn *out, coc__item *it); /* lock: item written or dropped; takes it */
void coc__pool_free(coc_engine *e);                                   /* at close */

#endif
