/*
 * record.h — the record layer: an optional filter between a TCP connection's socket and
 * its frames, for links the topology marks (docs/wire-protocol.md, "Record layer").
 *
 * The byte stream of frames is cut into records of up to COC__REC_MAX bytes. Each record
 * may be compressed (zstd or lz4, adaptively: one that does not shrink goes raw) and, on
 * an encrypted link, sealed with AES-256-GCM under a per-direction key derived from the
 * handshake. A record on the wire:
 *   u32 stored length (bytes after this header) | u8 codec | u24 plaintext length
 *   | stored bytes (compressed or raw; sealed: ciphertext then a 16-byte tag)
 * The 8 header bytes are authenticated with the record. Framing, matching and forwarding
 * above see the same byte stream as without the layer.
 */
#ifndef COC_RECORD_H
#define COC_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define COC__REC_MAX 65536 /* plaintext bytes per record */
#define COC__REC_HDR 8

enum coc__codec { COC__CODEC_NONE = 0, COC__CODEC_ZSTD = 1, COC__CODEC_LZ4 = 2 };

typedef struct coc__rec coc__rec;

/*
 * A record layer for one connection. seal: encrypt with keys derived from the pair key,
 * both hello nonces and the connector's hello flags (so a changed flag makes every record
 * fail); outgoing: this end is the connector (picks which key is whose); codec: how this
 * end compresses what it sends (any codec is accepted on receipt). NULL on failure.
 */
coc__rec *coc__rec_new(const uint8_t *pair_key, size_t key_len, const uint8_t *conn_nonce,
                       const uint8_t *acc_nonce, size_t nonce_len, uint16_t conn_flags,
                       int outgoing, int seal, int codec);
void coc__rec_free(coc__rec *r);

/* ---- sending (under the engine's lock) ---- */

/* Bytes of sealed records not yet written to the socket, and where they are. */
size_t coc__rec_tx_pending(const coc__rec *r, const uint8_t **data);
void coc__rec_tx_done(coc__rec *r, size_t n);   /* n of them were written */

/*
 * Make one record of the first bytes of iov[0..cnt) (at most COC__REC_MAX) while none is
 * pending. Returns the plaintext bytes taken (> 0), or COC_EPROTO if libcrypto failed.
 * *wire gets the record's size on the wire, *raw 1 when compression was tried and the
 * record went raw.
 */
ssize_t coc__rec_tx_seal(coc__rec *r, const struct iovec *iov, int cnt, size_t *wire, int *raw);

/* ---- receiving (under the engine's plock) ---- */

/* Where stream bytes read from the socket go, and how many fit; then report n of them. */
uint8_t *coc__rec_rx_space(coc__rec *r, size_t *room);
void coc__rec_rx_fed(coc__rec *r, size_t n);

/* 1 when plaintext or a whole record waits: the socket need not be read for more. */
int coc__rec_rx_ready(const coc__rec *r);

/*
 * Copy up to want bytes of plaintext into dst, opening buffered records as needed.
 * Returns the bytes copied (0: nothing whole buffered), or COC_EPROTO with *why set: a
 * malformed header, a record that fails authentication (tampered, replayed, reordered)
 * or does not decompress. *wire and *plain count the records opened.
 */
ssize_t coc__rec_rx_take(coc__rec *r, uint8_t *dst, size_t want, const char **why,
                         size_t *wire, size_t *plain);

#endif
