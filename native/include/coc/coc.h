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
    COC_EAUTH = COC_ERR_BASE - 2,      /* a peer failed to prove it holds the job's secret */
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
 * Run the engine's built-in self-test: checks the pieces that need no peer (for now the
 * error table). Returns 0 when all pass, else the negative code of the first failure.
 * Blocking, thread-safe, allocates nothing that outlives the call.
 */
int coc_selftest(void);

#ifdef __cplusplus
}
#endif
#endif /* COC_COC_H */
