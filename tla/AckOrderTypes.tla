--------------------------- MODULE AckOrderTypes ---------------------------
(***************************************************************************)
(* Constants, variables and types of the ackorder spec: one RocketMQ      *)
(* broker group (a master, its replicas/slaves, the producers' requests).  *)
(*                                                                         *)
(* Offsets are counted in records: record k of a log occupies [k-1, k) and *)
(* a request's nextOffset is k.  The reference implementation counts bytes *)
(* and its refinement mapping (reference/refinement.py) turns byte        *)
(* watermarks into record counts.  A record's value is the id of the      *)
(* request that put it (ids grow in put order), or Torn for a partly      *)
(* written tail record.                                                    *)
(*                                                                         *)
(* This module has no bounds: MCAckOrder.tla and the .cfg files hold them. *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Replicas,             \* the slaves of the group (model values)
    FlushMode,            \* flushDiskType: "SYNC_FLUSH" | "ASYNC_FLUSH"
    ReplMode,             \* brokerRole:    "SYNC_MASTER" | "ASYNC_MASTER"
    TransientStorePool,   \* transientStorePoolEnable: write buffer + commit step
    AckPolicy,            \* "ANY_REPLICA_MAX" (4.x push2SlaveMaxOffset)
                          \* | "AT_LEAST_K" (5.x inSyncReplicas, master counted)
                          \* | "ALL_IN_SYNC" (5.x allAckInSyncStateSet)
    InSyncReplicas,       \* K of AT_LEAST_K, the master included (RocketMQ's inSyncReplicas)
    FileSize,             \* records per commit-log file (mappedFileSizeCommitLog)
    CommitOnReplicaWait   \* the fix for seed 001 / RocketMQ #1372: under SYNC_MASTER with the pool,
                          \* a put commits the write buffer at once (slaves read committed data only)

\* Bug switches: one per ordering rule.  FALSE in every green cfg; each
\* _bug cfg turns exactly one on and must fail with the property named in
\* tla/manifest.json.  docs/model.md maps each one to the RocketMQ history.
CONSTANTS
    BugAckOnWrote,              \* flush leg judged by wrote, not by flushed
    BugAckOnCommitted,          \* flush leg judged by committed (page cache), before fsync
    BugTransferBeyondCommitted, \* HA transfer reads the transient-pool write buffer
    BugAnyReplicaForAllInSync,  \* push2SlaveMaxOffset used where ALL_IN_SYNC is configured
    BugTimeoutAsOK,             \* a timed-out request reported PUT_OK
    BugFlushOneFileReleasesAll, \* one file flushed, every committed waiter released
    BugRecoveryKeepsTorn,       \* CRC recovery keeps a torn tail record
    BugAcceptAckBeyondLog,      \* slave offsets trusted without a check (B3)
    BugHandshakeOffsetOnly,     \* handshake checks the offset, not the content (B22)
    BugFlushIgnoresFsyncError,  \* flushedPosition advanced on a failed fsync (B1)
    BugDoubleResponse,          \* the flush watchdog completes an answered request again
    BugNoFlushDiskWatcher,      \* no deadline on the flush leg (pre-4.9.3 pipeline)
    BugFsyncCoversFailedWrite,  \* after a failed write the core keeps the record as written and
                                \* the follow-up fsync covers it (found in the reference, issue 11)
    BugAckCheckedAgainstWrote,  \* a slave's report checked against wrote, not committed (B3's
                                \* check on the wrong watermark: the write buffer is trusted)
    BugFlushTimeoutHidesSlaveTimeout, \* thenCombine's precedence swapped (B23c): a flush
                                \* failure hides a replica failure
    BugHandshakeRefusesCaughtUp \* off-by-one in the handshake: a slave exactly at committed is
                                \* refused, so a caught-up slave that lost its link never returns

VARIABLES
    \* --- master (DefaultMessageStore / CommitLog / MappedFileQueue) ---
    mstate,       \* "UP" | "PROC_DOWN" (process died, page cache kept) | "MACHINE_DOWN"
    log,          \* records written: page cache, plus the write buffer when the pool is on
    committed,    \* committedWhere: records in the page cache (= Len(log) without the pool)
    flushed,      \* flushedWhere: what the master believes is fsync'd
    durable,      \* what really is fsync'd (differs from flushed only under B1)
    writable,     \* RunningFlags.isWriteable(): FALSE after a failed fsync or write
    unwritten,    \* records the master counts as committed whose bytes never reached the
                  \* page cache (a failed write kept as written): {} unless
                  \* BugFsyncCoversFailedWrite
    landed,       \* records after committed that a write reported as failed put into the
                  \* page cache anyway (EIO after the data was copied): the master does not
                  \* count them, but they outlive a process crash and recovery finds them
    reqs,         \* request id -> [off |-> nextOffset, flushDone |-> flush leg completed,
                  \*                status |-> "WAITING" or the response status]
    \* --- master's HA service (DefaultHAService / GroupTransferService) ---
    connected,    \* replica -> an HA connection to the current master incarnation exists
    ack,          \* replica -> slaveAckOffset last reported on that connection
    push2SlaveMaxOffset, \* max offset any connection ever reported (4.x ack rule)
    syncStateSet, \* replicas that ALL_IN_SYNC waits for (static until failover lands)
    \* --- replicas (HAClient + their own CommitLog) ---
    rlog,         \* replica -> records received (page cache; a replica crash keeps them)
    rUp,          \* replica -> process running
    \* --- ghost history, for properties only ---
    inv_responses, \* set of response events: id, offset, status, cause and the
                   \* watermarks / replica holders at the moment of the response
    \* --- state-space counters (bounded in MCAckOrder.tla) ---
    aux_ctrs       \* perturbations used so far, by kind

masterVars  == <<mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs>>
haVars      == <<connected, ack, push2SlaveMaxOffset, syncStateSet>>
replicaVars == <<rlog, rUp>>
vars == <<mstate, log, committed, flushed, durable, writable, unwritten, landed, reqs,
          connected, ack, push2SlaveMaxOffset, syncStateSet,
          rlog, rUp, inv_responses, aux_ctrs>>

Torn == 0   \* a record whose bytes were only partly written back (ids start at 1)

\* PutMessageStatus values the spec produces, plus the producer-side outcome
\* when the broker process dies under a waiting request.
PutOK               == "PUT_OK"
FlushDiskTimeout    == "FLUSH_DISK_TIMEOUT"
FlushSlaveTimeout   == "FLUSH_SLAVE_TIMEOUT"
SlaveNotAvailable   == "SLAVE_NOT_AVAILABLE"
ServiceNotAvailable == "SERVICE_NOT_AVAILABLE"
ClientTimeout       == "CLIENT_TIMEOUT"   \* sendMsgTimeout on the producer: broker gone
UnknownError        == "UNKNOWN_ERROR"    \* appendMessage failed (CommitLog: "else -> UNKNOWN_ERROR")
Waiting             == "WAITING"

Statuses == {PutOK, FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable,
             ServiceNotAvailable, ClientTimeout, UnknownError}
ErrorStatuses == Statuses \ {PutOK}

\* Who produced a response: the completion path (GroupCommitService /
\* GroupTransferService), a deadline (FlushDiskWatcher / GTS deadline), the
\* admission check, a failed page-cache write of the put itself, or the
\* producer noticing that the broker died.
Causes == {"Respond", "Timeout", "Reject", "WriteFail", "Crash"}

MasterStates == {"UP", "PROC_DOWN", "MACHINE_DOWN"}

Request == [off : Nat, flushDone : BOOLEAN, status : Statuses \cup {Waiting}]

\* written: the record was in the log (page cache, or the write buffer with the
\* pool) when answered; precedenceOK: the status followed thenCombine's
\* precedence over the legs pending then (a verdict, not the raw inputs, so
\* that the ghost history adds no states where no view trims it).
ResponseEvent == [id : Nat, off : Nat, status : Statuses, cause : Causes,
                  wrote : Nat, committed : Nat, flushed : Nat, durable : Nat,
                  holders : SUBSET Replicas, sss : SUBSET Replicas,
                  written : BOOLEAN, precedenceOK : BOOLEAN]

CounterKinds == {"masterProcessCrash", "masterMachineCrash", "replicaCrash", "replicaDisconnect",
                 "fsyncFailure", "writeFailure", "forgedReport"}

TypeOK ==
    /\ mstate \in MasterStates
    /\ log \in Seq(Nat)
    /\ committed \in Nat /\ flushed \in Nat /\ durable \in Nat
    /\ writable \in BOOLEAN
    /\ unwritten \subseteq Nat
    /\ landed \in Nat
    /\ reqs \in Seq(Request)
    /\ connected \in [Replicas -> BOOLEAN]
    /\ ack \in [Replicas -> Nat]
    /\ push2SlaveMaxOffset \in Nat
    /\ syncStateSet \subseteq Replicas
    /\ rlog \in [Replicas -> Seq(Nat)]
    /\ rUp \in [Replicas -> BOOLEAN]
    /\ inv_responses \subseteq ResponseEvent
    /\ aux_ctrs \in [CounterKinds -> Nat]

ConfigOK ==
    /\ FlushMode \in {"SYNC_FLUSH", "ASYNC_FLUSH"}
    /\ ReplMode \in {"SYNC_MASTER", "ASYNC_MASTER"}
    /\ TransientStorePool \in BOOLEAN
    /\ AckPolicy \in {"ANY_REPLICA_MAX", "AT_LEAST_K", "ALL_IN_SYNC"}
    /\ InSyncReplicas \in 1..(Cardinality(Replicas) + 1)
    /\ FileSize \in Nat \ {0}
    /\ CommitOnReplicaWait \in BOOLEAN
=============================================================================
