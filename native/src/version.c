/* version.c — the engine's version, its error texts and its self-test. */
#include <string.h>

#include "coc/coc.h"

#define COC_STR2(x) #x
#define COC_STR(x) COC_STR2(x)

const char *coc_version(void)
{
    return COC_STR(COC_VERSION_MAJOR) "." COC_STR(COC_VERSION_MINOR) "." COC_STR(COC_VERSION_PATCH);
}

static const char *const coc_error_text[] = {
    [COC_ERR_BASE - COC_EPROTO] = "protocol error: malformed frame from peer",
    [COC_ERR_BASE - COC_EAUTH] = "authentication failed: peer does not hold the job's secret",
    [COC_ERR_BASE - COC_ETRUNC] = "message truncated: receive buffer too small",
    [COC_ERR_BASE - COC_EPEERLOST] = "peer lost",
    [COC_ERR_BASE - COC_ENOROUTE] = "no route to destination",
    [COC_ERR_BASE - COC_ECLOSED] = "engine or connection closed",
    [COC_ERR_BASE - COC_ETIMEDOUT] = "operation timed out",
    [COC_ERR_BASE - COC_EINVAL] = "invalid argument",
    [COC_ERR_BASE - COC_ECANCELED] = "operation cancelled",
};

int coc_is_coc_error(int rc)
{
    return rc < COC_ERR_BASE && rc > COC_ERR_LAST;
}

const char *coc_strerror(int rc)
{
    if (rc >= 0)
        return "success";
    if (coc_is_coc_error(rc))
        return coc_error_text[COC_ERR_BASE - rc];
    if (rc > -4096)
        return strerror(-rc); /* glibc's table is static and read-only for known codes */
    return "unknown error";
}

int coc_selftest(void)
{
    for (int rc = COC_ERR_BASE - 1; rc > COC_ERR_LAST; rc--) {
        const char *text = coc_strerror(rc);
        if (!coc_is_coc_error(rc) || text == NULL || text[0] == '\0')
            return rc;
    }
    if (coc_is_coc_error(-1) || coc_is_coc_error(0))
        return COC_EINVAL;
    return 0;
}
