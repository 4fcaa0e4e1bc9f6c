"""The names mpi4py 4 offers, by namespace: what coc's compatibility layer knows to refuse.

A name listed here that the layer does not implement raises ``NotImplementedError`` naming
it (:func:`refusing`) (never an ``AttributeError`` that reads like a typo, never a silent no-op); a name not
listed is not mpi4py's and raises ``AttributeError``.
"""

__all__ = ["KNOWN", "refusing", "unsupported"]


def _names(text):
    return frozenset(text.split())


KNOWN = {
    "MPI": _names("""
        AINT ANY_SOURCE ANY_TAG APPNUM Add_error_class Add_error_code Add_error_string
        Aint_add Aint_diff Alloc_mem Attach_buffer BAND BFLOAT16_T BOOL BOR BOTTOM
        BSEND_OVERHEAD BUFFER_AUTOMATIC BXOR BYTE BottomType BufferAutomaticType CART CHAR
        CHARACTER COMBINER_CONTIGUOUS COMBINER_DARRAY COMBINER_DUP COMBINER_F90_COMPLEX
        COMBINER_F90_INTEGER COMBINER_F90_REAL COMBINER_HINDEXED COMBINER_HINDEXED_BLOCK
        COMBINER_HVECTOR COMBINER_INDEXED COMBINER_INDEXED_BLOCK COMBINER_NAMED
        COMBINER_RESIZED COMBINER_STRUCT COMBINER_SUBARRAY COMBINER_VALUE_INDEX
        COMBINER_VECTOR COMM_NULL COMM_SELF COMM_TYPE_HW_GUIDED COMM_TYPE_HW_UNGUIDED
        COMM_TYPE_RESOURCE_GUIDED COMM_TYPE_SHARED COMM_WORLD COMPLEX COMPLEX16 COMPLEX32
        COMPLEX4 COMPLEX8 CONGRUENT COUNT CXX_BOOL CXX_DOUBLE_COMPLEX CXX_FLOAT_COMPLEX
        CXX_LONG_DOUBLE_COMPLEX C_BOOL C_COMPLEX C_DOUBLE_COMPLEX C_FLOAT_COMPLEX
        C_LONG_DOUBLE_COMPLEX Cartcomm Close_port Comm Compute_dims DATATYPE_NULL
        DISPLACEMENT_CURRENT DISP_CUR DISTRIBUTE_BLOCK DISTRIBUTE_CYCLIC DISTRIBUTE_DFLT_DARG
        DISTRIBUTE_NONE DIST_GRAPH DOUBLE DOUBLE_COMPLEX DOUBLE_INT DOUBLE_PRECISION Datatype
        Detach_buffer Distgraphcomm ERRHANDLER_NULL ERRORS_ABORT ERRORS_ARE_FATAL
        ERRORS_RETURN Errhandler Exception FILE_NULL FLOAT FLOAT16_T FLOAT32_T FLOAT64_T
        FLOAT_INT F_BOOL F_COMPLEX F_DOUBLE F_DOUBLE_COMPLEX F_ERROR F_FLOAT F_FLOAT_COMPLEX
        F_INT F_SOURCE F_STATUS_SIZE F_TAG File Finalize Flush_buffer Free_mem GRAPH
        GROUP_EMPTY GROUP_NULL Get_abi_fortran_info Get_abi_info Get_abi_version Get_address
        Get_error_class Get_error_string Get_hw_resource_info Get_library_version
        Get_processor_name Get_version Graphcomm Grequest Group IDENT INFO_ENV INFO_NULL INT
        INT16_T INT32_T INT64_T INT8_T INTEGER INTEGER1 INTEGER16 INTEGER2 INTEGER4 INTEGER8
        INT_INT IN_PLACE IO Iflush_buffer InPlaceType Info Init Init_thread Intercomm
        Intracomm Is_finalized Is_initialized Is_thread_main KEYVAL_INVALID LAND LASTUSEDCODE
        LOCK_EXCLUSIVE LOCK_SHARED LOGICAL LOGICAL1 LOGICAL16 LOGICAL2 LOGICAL4 LOGICAL8 LONG
        LONG_DOUBLE LONG_DOUBLE_INT LONG_INT LONG_LONG LOR LXOR Lookup_name MAX MAXLOC
        MAX_DATAREP_STRING MAX_ERROR_STRING MAX_INFO_KEY MAX_INFO_VAL
        MAX_LIBRARY_VERSION_STRING MAX_OBJECT_NAME MAX_PORT_NAME MAX_PROCESSOR_NAME
        MAX_PSET_NAME_LEN MAX_STRINGTAG_LEN MESSAGE_NO_PROC MESSAGE_NULL MIN MINLOC
        MODE_APPEND MODE_CREATE MODE_DELETE_ON_CLOSE MODE_EXCL MODE_NOCHECK MODE_NOPRECEDE
        MODE_NOPUT MODE_NOSTORE MODE_NOSUCCEED MODE_RDONLY MODE_RDWR MODE_SEQUENTIAL
        MODE_UNIQUE_OPEN MODE_WRONLY Message NO_OP OFFSET OP_NULL ORDER_C ORDER_F
        ORDER_FORTRAN Op Open_port PACKED PROC_NULL PROD Pcontrol Pickle Prequest
        Publish_name Query_thread REAL REAL16 REAL2 REAL4 REAL8 REPLACE REQUEST_NULL ROOT
        Register_datarep Remove_error_class Remove_error_code Remove_error_string Request
        SEEK_CUR SEEK_END SEEK_SET SESSION_NULL SHORT SHORT_INT SIGNED_CHAR SIGNED_INT
        SIGNED_LONG SIGNED_LONG_LONG SIGNED_SHORT SIMILAR SINT16_T SINT32_T SINT64_T SINT8_T
        SUBVERSION SUCCESS SUM Session Status TAG_UB THREAD_FUNNELED THREAD_MULTIPLE
        THREAD_SERIALIZED THREAD_SINGLE TWOINT TYPECLASS_COMPLEX TYPECLASS_INTEGER
        TYPECLASS_LOGICAL TYPECLASS_REAL Topocomm UINT16_T UINT32_T UINT64_T UINT8_T UNDEFINED
        UNEQUAL UNIVERSE_SIZE UNSIGNED UNSIGNED_CHAR UNSIGNED_INT UNSIGNED_LONG
        UNSIGNED_LONG_LONG UNSIGNED_SHORT UNWEIGHTED Unpublish_name VERSION WCHAR
        WEIGHTS_EMPTY WIN_BASE WIN_CREATE_FLAVOR WIN_DISP_UNIT WIN_FLAVOR WIN_FLAVOR_ALLOCATE
        WIN_FLAVOR_CREATE WIN_FLAVOR_DYNAMIC WIN_FLAVOR_SHARED WIN_MODEL WIN_NULL WIN_SEPARATE
        WIN_SIZE WIN_UNIFIED WTIME_IS_GLOBAL Win Wtick Wtime buffer get_vendor memory pickle
    """),
    "Comm": _names("""
        Abort Accept Ack_failed Agree Allgather Allgather_init Allgatherv Allgatherv_init
        Allreduce Allreduce_init Alltoall Alltoall_init Alltoallv Alltoallv_init Alltoallw
        Alltoallw_init Attach_buffer Barrier Barrier_init Bcast Bcast_init Bsend Bsend_init
        Call_errhandler Cart_map Clone Compare Connect Create Create_cart Create_dist_graph
        Create_dist_graph_adjacent Create_errhandler Create_from_group Create_graph
        Create_group Create_intercomm Create_keyval Delete_attr Detach_buffer Disconnect Dup
        Dup_with_info Exscan Exscan_init Flush_buffer Free Free_keyval Gather Gather_init
        Gatherv Gatherv_init Get_attr Get_errhandler Get_failed Get_group Get_info Get_name
        Get_parent Get_rank Get_size Get_topology Graph_map Iagree Iallgather Iallgatherv
        Iallreduce Ialltoall Ialltoallv Ialltoallw Ibarrier Ibcast Ibsend Idup Idup_with_info
        Iexscan Iflush_buffer Igather Igatherv Improbe Iprobe Irecv Ireduce Ireduce_scatter
        Ireduce_scatter_block Irsend Is_inter Is_intra Is_revoked Iscan Iscatter Iscatterv
        Isend Isendrecv Isendrecv_replace Ishrink Issend Join Mprobe Precv_init Probe
        Psend_init Recv Recv_init Reduce Reduce_init Reduce_scatter Reduce_scatter_block
        Reduce_scatter_block_init Reduce_scatter_init Revoke Rsend Rsend_init Scan Scan_init
        Scatter Scatter_init Scatterv Scatterv_init Send Send_init Sendrecv Sendrecv_replace
        Set_attr Set_errhandler Set_info Set_name Shrink Spawn Spawn_multiple Split
        Split_type Ssend Ssend_init allgather allreduce alltoall barrier bcast bsend exscan
        f2py free fromhandle fromint gather group handle ibsend improbe info iprobe irecv
        is_inter is_intra is_topo isend issend mprobe name probe py2f rank recv reduce scan
        scatter send sendrecv size ssend toint topology
    """),
    "Request": _names("""
        Cancel Free Get_status Get_status_all Get_status_any Get_status_some Test Testall
        Testany Testsome Wait Waitall Waitany Waitsome cancel f2py free fromhandle fromint
        get_status get_status_all get_status_any get_status_some handle py2f test testall
        testany testsome toint wait waitall waitany waitsome
    """),
    "Status": _names("""
        Get_count Get_elements Get_error Get_source Get_tag Is_cancelled Set_cancelled
        Set_elements Set_error Set_source Set_tag cancelled count error f2py py2f source tag
        tomemory
    """),
    "Group": _names("""
        Compare Create_from_session_pset Difference Dup Excl Free Get_rank Get_size Incl
        Intersect Intersection Range_excl Range_incl Translate_ranks Union f2py free
        fromhandle fromint handle py2f rank size toint
    """),
    "Datatype": _names("""
        Commit Create_contiguous Create_darray Create_dup Create_f90_complex
        Create_f90_integer Create_f90_real Create_hindexed Create_hindexed_block Create_hvector
        Create_indexed Create_indexed_block Create_keyval Create_resized Create_struct
        Create_subarray Create_vector Delete_attr Dup Free Free_keyval Get_attr Get_contents
        Get_envelope Get_extent Get_name Get_size Get_true_extent Get_value_index Match_size
        Pack Pack_external Pack_external_size Pack_size Resized Set_attr Set_name Unpack
        Unpack_external combiner contents decode envelope extent f2py free fromcode
        fromhandle fromint handle is_named is_predefined lb name py2f size tocode toint
        true_extent true_lb true_ub typechar typestr ub
    """),
    "Op": _names("""
        Create Free Is_commutative Reduce_local f2py free fromhandle fromint handle
        is_commutative is_predefined py2f toint
    """),
    "Message": _names("""
        Iprobe Irecv Probe Recv f2py free fromhandle fromint handle iprobe irecv probe py2f
        recv toint
    """),
    "mpi4py": _names("""
        MPI bench futures get_config get_include get_math_library profile rc run typing
        util __main__
    """),
}


class _Refused:
    """A class attribute standing for an mpi4py name coc does not provide: reading it raises."""

    def __init__(self, namespace, name):
        self.namespace, self.name = namespace, name

    def __get__(self, obj, owner=None):
        raise unsupported(self.namespace, self.name)


def refusing(namespace):
    """Class decorator: every mpi4py name of ``namespace`` the class lacks raises when read.

    Class attributes, not ``__getattr__``: a class with ``__getattr__`` pays for it on every
    attribute lookup, and these classes sit on the message path.
    """
    def decorate(cls):
        for name in KNOWN[namespace]:
            if not any(name in vars(base) for base in cls.__mro__):
                setattr(cls, name, _Refused(namespace, name))
        return cls
    return decorate


def unsupported(namespace, name):
    """Return the error for ``namespace.name``: NotImplementedError if mpi4py has it."""
    where = namespace if namespace in ("MPI", "mpi4py") else f"MPI.{namespace}"
    if name in KNOWN.get(namespace, ()):
        return NotImplementedError(
            f"{where}.{name} is not supported by coc's mpi4py compatibility mode "
            "(see the table of supported names in coc's docs/api.md)")
    return AttributeError(f"{where} has no attribute {name!r}")
