# Mirrors native/include/coc/coc.h and nothing else.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "coc/coc.h" nogil:
    int COC_VERSION_MAJOR
    int COC_VERSION_MINOR
    int COC_VERSION_PATCH

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
    int COC_ERR_LAST

    const char *coc_version()
    const char *coc_strerror(int rc)
    int coc_is_coc_error(int rc)
    int coc_selftest()

    ctypedef struct coc_engine:
        pass
    ctypedef struct coc_request:
        pass

    int COC_ANY_SOURCE
    int COC_ANY_TAG
    int COC_MAX_TAG
    int COC_SECRET_MIN
    int COC_SECRET_MAX
    int COC_ENGINE_FORWARD
    int COC_KEY_LEN
    int COC_PEER_GATEWAY

    ctypedef struct coc_peer_key:
        uint32_t id
        uint32_t flags
        uint8_t key[32]

    int coc_pair_key(const uint8_t *secret, size_t secret_len, uint32_t a, uint32_t a_flags,
                     uint32_t b, uint32_t b_flags, uint8_t *out)
    int COC_ENGINE_SHM
    int COC_ENGINE_NO_SHM
    int COC_ENGINE_SPIN_ANY_LOAD

    ctypedef struct coc_engine_config:
        uint32_t self_id
        const uint8_t *secret
        size_t secret_len
        const char *listen_host
        uint16_t port_min
        uint16_t port_max
        size_t eager_limit
        size_t fragment_size
        size_t forward_window
        uint32_t flags
        uint32_t handshake_timeout_ms
        int32_t spin_ns
        const coc_peer_key *keys
        size_t nkeys
        int32_t liveness_ms
        size_t shm_ring
        int32_t send_hold_ns

    void coc_engine_config_init(coc_engine_config *cfg)
    int coc_engine_open(const coc_engine_config *cfg, coc_engine **out)
    int coc_engine_close(coc_engine *e)
    int coc_engine_address(coc_engine *e, char *buf, size_t len)
    int coc_engine_add_peer(coc_engine *e, uint32_t id, const char *address)
    int coc_engine_set_route(coc_engine *e, uint32_t dest, const uint32_t *hops,
                             const uint32_t *weights, size_t n)
    int COC_CLASS_SMALL
    int COC_CLASS_LARGE
    int coc_engine_set_route_class(coc_engine *e, uint32_t dest, int size_class,
                                   const uint32_t *hops, const uint32_t *weights, size_t n)
    int coc_engine_connect(coc_engine *e, uint32_t hop)
    int coc_engine_peer_connected(coc_engine *e, uint32_t id)
    int coc_engine_set_peer_delay(coc_engine *e, uint32_t id, uint64_t delay_ns)
    int coc_engine_set_peer_wire(coc_engine *e, uint32_t id, uint32_t flags)
    enum:
        COC_WIRE_ENCRYPT
        COC_WIRE_ZSTD
        COC_WIRE_LZ4
    int coc_engine_fd(coc_engine *e)
    int coc_engine_drain_fd(coc_engine *e)

    ctypedef struct coc_status:
        int32_t source
        int32_t tag
        uint32_t context
        uint64_t count
        int error

    int coc_isend(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag, const void *buf,
                  size_t len, coc_request **out)
    int coc_isend_or_done(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag,
                          const void *buf, size_t len, coc_request **out)
    int coc_irecv(coc_engine *e, int32_t source, uint32_t context, int32_t tag, void *buf,
                  size_t cap, coc_request **out)
    int coc_wait(coc_request *r, int64_t timeout_ns, coc_status *st)
    int coc_test(coc_request *r, coc_status *st)
    int coc_cancel(coc_request *r)
    int coc_request_free(coc_request *r)
    int coc_iprobe(coc_engine *e, int32_t source, uint32_t context, int32_t tag, coc_status *st)
    int coc_probe(coc_engine *e, int32_t source, uint32_t context, int32_t tag,
                  int64_t timeout_ns, coc_status *st)

    int coc_irecv_alloc(coc_engine *e, int32_t source, uint32_t context, int32_t tag,
                        size_t max, coc_request **out)
    void *coc_request_take_buffer(coc_request *r, size_t *len)
    void coc_buffer_free(void *buf)
    ctypedef struct coc_iovec:
        const void *base
        size_t len
    int COC_IOV_MAX
    int coc_isendv(coc_engine *e, uint32_t dest, uint32_t context, int32_t tag,
                   const coc_iovec *iov, size_t n, coc_request **out)

    ctypedef struct coc_stats:
        uint64_t frames_sent
        uint64_t frames_received
        uint64_t frames_forwarded
        uint64_t bytes_sent
        uint64_t bytes_received
        uint64_t bytes_forwarded
        uint64_t connections_open
        uint64_t auth_failures
        uint64_t protocol_errors
        uint64_t peers_lost
        uint64_t unexpected_messages
        uint64_t unexpected_bytes
        uint64_t forward_bytes_buffered
        uint64_t forward_bytes_buffered_max
        uint64_t duplicate_ids
        uint64_t waits_at_once
        uint64_t waits_spun
        uint64_t waits_polled
        uint64_t waits_slept
        uint64_t spin_ns
        uint64_t spin_budget_ns
        uint64_t waits_contended
        uint64_t waits_unspun
        uint64_t record_plain_sent
        uint64_t record_wire_sent
        uint64_t record_plain_received
        uint64_t record_wire_received
        uint64_t records_raw
        uint64_t failovers
        uint64_t frames_resent
        uint64_t duplicates_dropped
        uint64_t socket_reads
        uint64_t socket_writes
        uint64_t frames_held
        uint64_t peers_dialed_back
        uint64_t reads_unpolled
        uint64_t reads_blocked
        uint64_t requests_completed

    int coc_engine_stats(coc_engine *e, coc_stats *st)
    int coc_engine_take_log(coc_engine *e, char *buf, size_t len)
