/*
 * shm.h — the same-host transport's building block: a single-producer/single-consumer
 * byte ring in shared memory (memfd), with a "reader asleep" flag so the writer rings a
 * doorbell (any fd: the connection's unix socket, an eventfd) only when the reader is
 * about to block. A ring carries the same byte stream as a socket (handshake aside), so
 * frames keep the wire header of docs/wire-protocol.md and parsing is unchanged.
 *
 * Layout of one ring (page-aligned, `size` a power of two):
 *   page 0: head (producer's line), tail and asleep (consumer's lines), 64 bytes apart
 *   pages 1..: `size` data bytes
 * A segment holds two rings, one per direction (coc__shm_seg_len). A reader with nothing
 * else to watch may instead sleep on its asleep word as a futex (coc__ring_nap): the
 * writer then wakes it there, one FUTEX_WAKE where the doorbell costs a socket write and
 * the reader a poller's wake-up and a read. Not wired into the
 * engine's connections yet: see docs/engine.md "Same-host transport".
 */
#ifndef COC_SHM_H
#define COC_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define COC__SHM_RING_MIN 4096u
#define COC__SHM_RING_MAX (64u << 20)
#define COC__SHM_RING_DEFAULT (1u << 20)

typedef struct coc__ring {
    struct coc__ring_ctl *ctl;
    uint8_t *data;
    size_t size;                 /* power of two */
} coc__ring;

/* Bytes a segment of two rings of `size` takes. */
size_t coc__shm_seg_len(size_t size);
/* Create an anonymous segment (memfd, close-on-exec) for two rings of `size` bytes,
 * zeroed; returns the fd or -errno (COC_EINVAL: size not a power of two in range). */
int coc__shm_create(size_t size);
/* The ring size of a segment received from a peer (from its length), or a negative error
 * (COC_EINVAL also when it is not sealed against shrinking). */
int64_t coc__shm_ring_size(int fd);
/* Map ring `which` (0 or 1) of the segment fd; 0 or -errno. */
int coc__ring_map(coc__ring *r, int fd, size_t size, int which);
void coc__ring_unmap(coc__ring *r);

/* Producer: copy up to the free space from iov[0..cnt) in order; returns bytes written
 * (0: full). Sets *bell when the reader was asleep and must be woken through the doorbell. */
size_t coc__ring_write(coc__ring *r, const struct iovec *iov, int cnt, int *bell);
/* Producer, after a write found the ring full: ask the reader for a doorbell when it makes
 * room; returns 1 when there is room already (write again), 0 when a bell will come. */
int coc__ring_want_room(coc__ring *r);
/* Consumer: copy up to max buffered bytes to dst; returns bytes read (0: empty). Sets
 * *bell when the writer waits for room and must be woken through the doorbell. */
size_t coc__ring_read(coc__ring *r, void *dst, size_t max, int *bell);
/* Consumer: bytes buffered now. */
size_t coc__ring_avail(const coc__ring *r);
/* Consumer, before blocking on the doorbell: mark the reader asleep; returns 0 when it
 * may block, 1 when data is already there (the flag is cleared again). */
int coc__ring_sleep(coc__ring *r);
/* Consumer, after waking: clear the asleep flag. */
void coc__ring_wake(coc__ring *r);
/* Producer: whether a bell for room was asked for (coc__ring_want_room) and has not come. */
int coc__ring_waits_room(const coc__ring *r);
/* Consumer: sleep until the producer writes (it wakes the futex instead of ringing the
 * doorbell) or timeout_ms pass; returns 1 when data is there. No doorbell is rung for
 * what comes meanwhile: only a thread that is the ring's only reader may nap. */
int coc__ring_nap(coc__ring *r, int timeout_ms);

#endif
