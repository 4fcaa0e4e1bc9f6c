# Mirrors native/include/coc/coc.h and nothing else.
cdef extern from "coc/coc.h" nogil:
    int COC_ERR_BASE
    int COC_EPROTO
    int COC_EAUTH
    int COC_ETRUNC
    int COC_EPEERLOST
    int COC_ENOROUTE
    int COC_ECLOSED
    int COC_ETIMEDOUT
    int COC_EINVAL
    int COC_ECANCELED

    const char *coc_version()
    const char *coc_strerror(int rc)
    int coc_is_coc_error(int rc)
    int coc_selftest()
