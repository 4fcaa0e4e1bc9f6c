/*
 * wire.h — the bytes on a connection: the handshake messages and the fixed frame header.
 * docs/wire-protocol.md describes every byte; these functions are the only code that
 * reads or writes them. Decoders validate every field before anything is allocated.
 */
#ifndef COC_WIRE_H
#define COC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define COC__WIRE_MAGIC 0xC0
#define COC__WIRE_VERSION 1
/* The hello's own version: 2 added the incarnation (wire-protocol.md, "Handshake"). */
#define COC__HELLO_VERSION 2
#define COC__HDR_LEN 64
#define COC__MAX_PAYLOAD (16u << 20)            /* largest frame payload anyone may send */
#define COC__MAX_MESSAGE ((uint64_t)1 << 40)    /* largest message (1 TiB) */

enum coc__frame_type {
    COC__EAGER = 1, /* a whole small message */
    COC__RTS = 2,   /* rendezvous: request to send (envelope only) */
    COC__CTS = 3,   /* rendezvous: clear to send, from the receiver */
    COC__DATA = 4,  /* rendezvous: one fragment of the payload */
    COC__ERROR = 5, /* a gateway reports that `source` became unreachable; with rcookie:
                       `source` reports that the transfer to that handle failed */
    COC__BYE = 6,   /* orderly close of the connection's sender */
    COC__CREDIT = 7, /* the receiver's eager credit returned so far, `total` mod 2^40 */
    COC__PATH = 8,   /* a gateway: frames between you and `source` may have died with a
                        hop; send again what it has not acknowledged */
    COC__PING = 9,   /* liveness, one hop: the connection's sender is alive */
    COC__DONE = 10,  /* rendezvous: the receiver has every byte of the send `scookie` */
    COC__TYPE_LAST
};

typedef struct coc__hdr {
    uint8_t type, flags;
    uint32_t context, source, dest;
    int32_t tag;       /* >= 0; ERROR frames carry a negative coc error code */
    uint32_t len;      /* payload bytes that follow this header */
    uint64_t seq;      /* sender's message number towards dest (diagnostics) */
    uint64_t offset;   /* DATA: where this fragment goes; EAGER, RTS, CTS, CREDIT, DONE: the
                          acknowledgement (next sequence number expected from dest) */
    uint64_t total;    /* EAGER/RTS: message size; CTS/DATA: bytes being transferred;
                          CREDIT: eager credit returned */
    uint64_t scookie;  /* sender's rendezvous handle (RTS, CTS) */
    uint64_t rcookie;  /* receiver's rendezvous handle (CTS, DATA) */
} coc__hdr;

void coc__hdr_encode(const coc__hdr *h, uint8_t out[COC__HDR_LEN]);
/* Decode and validate; 0 or COC_EPROTO (why is written to *why when not NULL). */
int coc__hdr_decode(const uint8_t in[COC__HDR_LEN], coc__hdr *h, const char **why);

/* ---- handshake ---- */
#define COC__HELLO_LEN 48
#define COC__PROOF_LEN 32
#define COC__NONCE_LEN 32
#define COC__ROLE_CONNECTOR 1
#define COC__ROLE_ACCEPTOR 2
#define COC__HELLO_GATEWAY 0x1 /* hello flag: the sender forwards frames */
#define COC__HELLO_SHM 0x2     /* connector's hello: frames after the handshake go through
                                  the shared-memory segment sent with this hello */
/* Connector's hello to a peer on a marked network, TCP or unix (record.h; never with SHM):
 * after the handshake both directions go through the record layer; SEAL: records are
 * encrypted; ZSTD/LZ4: the connector compresses with it. */
#define COC__HELLO_SEAL 0x4
#define COC__HELLO_ZSTD 0x8
#define COC__HELLO_LZ4 0x10
#define COC__HELLO_RECORDS (COC__HELLO_SEAL | COC__HELLO_ZSTD | COC__HELLO_LZ4)

typedef struct coc__hello {
    uint8_t role;
    uint16_t flags;
    uint32_t id;
    uint32_t incarnation; /* the sending engine's, random and nonzero, fixed while it is open */
    uint8_t nonce[COC__NONCE_LEN];
} coc__hello;

void coc__hello_encode(const coc__hello *h, uint8_t out[COC__HELLO_LEN]);
int coc__hello_decode(const uint8_t in[COC__HELLO_LEN], coc__hello *h, const char **why);

/*
 * The proof that `prover_role` holds the key of this pair of endpoints (coc_pair_key):
 * HMAC-SHA256(key, "coc-auth-3" || prover_role || connector nonce || acceptor nonce ||
 * connector id || acceptor id || connector incarnation || acceptor incarnation).
 */
void coc__proof(const uint8_t *key, size_t key_len, uint8_t prover_role,
                const coc__hello *connector, const coc__hello *acceptor,
                uint8_t out[COC__PROOF_LEN]);

#endif
