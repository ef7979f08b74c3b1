--------------------------- MODULE AckOrderTypes ---------------------------
(***************************************************************************)
(* Constants, variables and types of the ackorder spec: one RocketMQ      *)
(* broker group (a master, its replicas/slaves, the producers' requests).  *)
(*                                                                         *)
(* Offsets are counted in records: record k of a log occupies [k-1, k) and *)
(* a request's nextOffset is k.  The reference implementation counts bytes *)
(* and its refinement mapping (spec/refinement.py) turns byte watermarks   *)
(* into record counts.  A record's value is the id of the request that put *)
(* it (ids grow in put order), or Torn for a partly written tail record.   *)
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
    BugNoFlushDiskWatcher       \* no deadline on the flush leg (pre-4.9.3 pipeline)

VARIABLES
    \* --- master (DefaultMessageStore / CommitLog / MappedFileQueue) ---
    mstate,       \* "UP" | "PROC_DOWN" (process died, page cache kept) | "MACHINE_DOWN"
    log,          \* records written: page cache, plus the write buffer when the pool is on
    committed,    \* committedWhere: records in the page cache (= Len(log) without the pool)
    flushed,      \* flushedWhere: what the master believes is fsync'd
    durable,      \* what really is fsync'd (differs from flushed only under B1)
    writable,     \* RunningFlags.isWriteable(): FALSE after a failed fsync
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

masterVars  == <<mstate, log, committed, flushed, durable, writable, reqs>>
haVars      == <<connected, ack, push2SlaveMaxOffset, syncStateSet>>
replicaVars == <<rlog, rUp>>
vars == <<mstate, log, committed, flushed, durable, writable, reqs,
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
Waiting             == "WAITING"

Statuses == {PutOK, FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable,
             ServiceNotAvailable, ClientTimeout}
ErrorStatuses == Statuses \ {PutOK}

\* Who produced a response: the completion path (GroupCommitService /
\* GroupTransferService), a deadline (FlushDiskWatcher / GTS deadline), the
\* admission check, or the producer noticing that the broker died.
Causes == {"Respond", "Timeout", "Reject", "Crash"}

MasterStates == {"UP", "PROC_DOWN", "MACHINE_DOWN"}

Request == [off : Nat, flushDone : BOOLEAN, status : Statuses \cup {Waiting}]

ResponseEvent == [id : Nat, off : Nat, status : Statuses, cause : Causes,
                  wrote : Nat, committed : Nat, flushed : Nat, durable : Nat,
                  holders : SUBSET Replicas, sss : SUBSET Replicas]

CounterKinds == {"masterProcessCrash", "masterMachineCrash", "replicaCrash", "replicaDisconnect",
                 "fsyncFailure"}

TypeOK ==
    /\ mstate \in MasterStates
    /\ log \in Seq(Nat)
    /\ committed \in Nat /\ flushed \in Nat /\ durable \in Nat
    /\ writable \in BOOLEAN
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
